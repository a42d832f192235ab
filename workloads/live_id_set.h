// The ids of the buffers a trace has allocated and not yet freed: how trace readers check that
// every free names a live buffer. It holds live ids only, so its size follows the trace's peak
// live set, never its length. Open addressing with linear probing, deletion by backward shift.
// Each live id also has a slot (Op::slot): a small number, 1 and up, reused last-freed first,
// so the harness keeps per-buffer state in arrays without hashing the ids again.
// Small ids (below kDenseMax, as a trace that numbers its buffers from 0 has) are looked up in
// an array by id instead, grown to the largest seen: no hash, no probe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace gmb {

class LiveIdSet {
 public:
  LiveIdSet() { rehash(1024); }

  // Makes id live; returns its slot, or 0 when id is already live (then nothing changes).
  std::uint32_t insert(std::uint64_t id) {
    if (id < dense_.size()) {
      if (dense_[id]) return 0;
      return dense_[id] = take_slot();
    }
    return insert_other(id);
  }

  // Ends id; returns the slot it had, or 0 when id is not live.
  std::uint32_t erase(std::uint64_t id) {
    if (id < dense_.size()) {
      const std::uint32_t slot = dense_[id];
      dense_[id] = 0;
      if (slot) free_.push_back(slot);
      return slot;
    }
    return erase_other(id);
  }

  // The slot of a live id, 0 when id is not live.
  std::uint32_t find(std::uint64_t id) const {
    if (id < dense_.size()) return dense_[id];
    if (id < kDenseMax) return 0;
    if (id == kEmpty) return empty_key_slot_;
    for (std::size_t i = home(id); entries_[i].id != kEmpty; i = (i + 1) & mask_)
      if (entries_[i].id == id) return entries_[i].slot;
    return 0;
  }

  // Every slot given so far is below this.
  std::uint32_t slots_end() const { return next_slot_; }

 private:
  // insert and erase of the ids not in dense_ yet: small ones grow it, others are hashed.
  [[gnu::noinline]] std::uint32_t insert_other(std::uint64_t id) {
    if (id < kDenseMax) {
      grow_dense(id);
      return insert(id);
    }
    if (id == kEmpty) {
      if (empty_key_slot_) return 0;
      return empty_key_slot_ = take_slot();
    }
    if ((size_ + 1) * 4 > entries_.size() * 3) rehash(entries_.size() * 2);
    std::size_t i = home(id);
    for (; entries_[i].id != kEmpty; i = (i + 1) & mask_)
      if (entries_[i].id == id) return 0;
    const std::uint32_t slot = take_slot();
    entries_[i] = {id, slot};
    ++size_;
    return slot;
  }

  [[gnu::noinline]] std::uint32_t erase_other(std::uint64_t id) {
    if (id < kDenseMax) return 0;  // never inserted (it would be in dense_)
    if (id == kEmpty) {
      const std::uint32_t slot = empty_key_slot_;
      empty_key_slot_ = 0;
      if (slot) free_.push_back(slot);
      return slot;
    }
    std::size_t i = home(id);
    while (entries_[i].id != id) {
      if (entries_[i].id == kEmpty) return 0;
      i = (i + 1) & mask_;
    }
    const std::uint32_t slot = entries_[i].slot;
    for (std::size_t j = (i + 1) & mask_; entries_[j].id != kEmpty; j = (j + 1) & mask_) {
      const std::size_t h = home(entries_[j].id);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {
        entries_[i] = entries_[j];
        i = j;
      }
    }
    entries_[i].id = kEmpty;
    --size_;
    free_.push_back(slot);
    return slot;
  }

  static constexpr std::uint64_t kEmpty = ~std::uint64_t(0);
  static constexpr std::uint64_t kDenseMax = std::uint64_t(1) << 20;  // 4 MiB of slots at most
  // dense_ covers id (< kDenseMax). Ids below kDenseMax are never hashed, so none move.
  void grow_dense(std::uint64_t id) {
    std::size_t n = dense_.empty() ? 1024 : dense_.size();
    while (n <= id) n *= 2;
    dense_.resize(std::min<std::size_t>(n, kDenseMax), 0);
  }
  struct Entry {
    std::uint64_t id = kEmpty;
    std::uint32_t slot = 0;
  };
  std::uint32_t take_slot() {
    if (!free_.empty()) {
      const std::uint32_t slot = free_.back();
      free_.pop_back();
      return slot;
    }
    if (next_slot_ == UINT32_MAX) throw std::length_error("more than 2^32 - 2 buffers live at once");
    return next_slot_++;
  }
  std::size_t home(std::uint64_t id) const { return std::size_t((id * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(std::size_t capacity) {
    std::vector<Entry> old = std::move(entries_);
    entries_.assign(capacity, Entry{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    for (const Entry& e : old)
      if (e.id != kEmpty) {
        std::size_t i = home(e.id);
        while (entries_[i].id != kEmpty) i = (i + 1) & mask_;
        entries_[i] = e;
      }
  }

  std::vector<std::uint32_t> dense_;  // by id below its size: the slot (0: not live)
  std::vector<Entry> entries_;        // the other ids
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;  // hashed ids
  std::uint32_t empty_key_slot_ = 0;  // the slot of the one id equal to the empty marker (0: not live)
  std::vector<std::uint32_t> free_;   // slots of ended ids, reused last first
  std::uint32_t next_slot_ = 1;
};

}  // namespace gmb
