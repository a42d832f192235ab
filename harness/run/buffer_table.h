// The runner's map from a workload's buffer id to the pointer its allocator returned: looked up
// for every free and every buffer a kernel touches, so it must cost next to nothing (the
// harness's own time is what issue 5 bounds). Open addressing with linear probing in one flat
// array, deletion by backward shift (no tombstones, so lookups stay short however many ids
// come and go).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "devices/device.h"  // DevPtr
#include "workloads/workload.h"  // BufferId

namespace gmb {

class BufferTable {
 public:
  BufferTable() : BufferTable(1024) {}
  explicit BufferTable(std::size_t expected) { rehash(capacity_for(expected)); }

  std::size_t size() const { return size_ + (reserved_key_value_ ? 1 : 0); }

  // Inserts or replaces.
  void put(BufferId id, DevPtr ptr) {
    if (id == kEmpty) {
      reserved_key_value_ = ptr;
      return;
    }
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
    std::size_t i = home(id);
    while (slots_[i].id != kEmpty && slots_[i].id != id) i = (i + 1) & mask_;
    if (slots_[i].id == kEmpty) ++size_;
    slots_[i] = {id, ptr};
  }

  // put() that returns the value id had before, if it was there: one probe for both.
  std::optional<DevPtr> exchange(BufferId id, DevPtr ptr) {
    if (id == kEmpty) return std::exchange(reserved_key_value_, ptr);
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
    std::size_t i = home(id);
    while (slots_[i].id != kEmpty && slots_[i].id != id) i = (i + 1) & mask_;
    std::optional<DevPtr> old;
    if (slots_[i].id == kEmpty)
      ++size_;
    else
      old = slots_[i].ptr;
    slots_[i] = {id, ptr};
    return old;
  }

  // Inserts id with ptr unless it is there; returns its value when it was (then unchanged).
  std::optional<DevPtr> put_if_absent(BufferId id, DevPtr ptr) {
    if (id == kEmpty) {
      if (reserved_key_value_) return reserved_key_value_;
      reserved_key_value_ = ptr;
      return std::nullopt;
    }
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
    std::size_t i = home(id);
    while (slots_[i].id != kEmpty && slots_[i].id != id) i = (i + 1) & mask_;
    if (slots_[i].id == id) return slots_[i].ptr;
    ++size_;
    slots_[i] = {id, ptr};
    return std::nullopt;
  }

  std::optional<DevPtr> find(BufferId id) const {
    if (id == kEmpty) return reserved_key_value_;
    for (std::size_t i = home(id);; i = (i + 1) & mask_) {
      if (slots_[i].id == id) return slots_[i].ptr;
      if (slots_[i].id == kEmpty) return std::nullopt;
    }
  }

  // Removes id and returns its pointer, if it was there.
  std::optional<DevPtr> take(BufferId id) {
    if (id == kEmpty) {
      auto v = reserved_key_value_;
      reserved_key_value_.reset();
      return v;
    }
    std::size_t i = home(id);
    while (slots_[i].id != id) {
      if (slots_[i].id == kEmpty) return std::nullopt;
      i = (i + 1) & mask_;
    }
    DevPtr ptr = slots_[i].ptr;
    // Backward shift: pull later members of the probe run into the hole when their home
    // slot does not lie (cyclically) between the hole and them.
    for (std::size_t j = (i + 1) & mask_; slots_[j].id != kEmpty; j = (j + 1) & mask_) {
      std::size_t h = home(slots_[j].id);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].id = kEmpty;
    --size_;
    return ptr;
  }

  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.id != kEmpty) f(s.id, s.ptr);
    if (reserved_key_value_) f(kEmpty, *reserved_key_value_);
  }

  void clear() {
    for (Slot& s : slots_) s.id = kEmpty;
    size_ = 0;
    reserved_key_value_.reset();
  }

 private:
  static constexpr BufferId kEmpty = ~BufferId(0);
  struct Slot {
    BufferId id = kEmpty;
    DevPtr ptr = 0;
  };

  static std::size_t capacity_for(std::size_t n) {
    std::size_t c = 16;
    while (c * 3 < n * 4) c *= 2;
    return c;
  }
  // Workload ids are often consecutive and used in order: runs of 4 consecutive ids share one
  // 64-byte line (fewer cache misses when other code, such as the CUDA driver, has evicted the
  // table), and a multiplicative hash spreads the runs over the table.
  std::size_t home(BufferId id) const {
    return std::size_t((((id >> 2) * 0x9E3779B97F4A7C15ull) >> shift_) * 4 + (id & 3)) & mask_;
  }

  void rehash(std::size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (const Slot& s : old)
      if (s.id != kEmpty) put(s.id, s.ptr);
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
  std::optional<DevPtr> reserved_key_value_;  // the one id equal to the empty marker
};

}  // namespace gmb
