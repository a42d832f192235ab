// What is live at each device pointer (the allocations an allocator has handed out, the blocks
// a snapshot's trace has allocated): looked up on every free, so one flat array (open
// addressing, linear probing, deletion by backward shift) rather than a node per entry. The
// order of for_each is unspecified.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/types.h"

namespace gmb {

// The value of a LiveMap that is a set of pointers: a slot is then 8 bytes, not 16.
struct NoValue {};

template <class Value>
class LiveMap {
 public:
  LiveMap() { rehash(64); }

  std::size_t size() const { return size_ + (has_reserved_ ? 1 : 0); }

  // Inserts or replaces.
  void put(DevPtr ptr, const Value& v) {
    if (ptr == kEmpty) {
      has_reserved_ = true;
      reserved_value_ = v;
      return;
    }
    if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.size() * 2);
    std::size_t i = home(ptr);
    while (slots_[i].ptr != kEmpty && slots_[i].ptr != ptr) i = (i + 1) & mask_;
    if (slots_[i].ptr == kEmpty) ++size_;
    slots_[i] = {ptr, v};
  }

  // Asks for ptr's home slot to be brought into the cache: a caller that puts many pointers in
  // a row, prefetching a few ahead, waits on one miss at a time no more.
  void prefetch(DevPtr ptr) const { __builtin_prefetch(&slots_[home(ptr)], 1); }

  // The value at ptr (nullptr: none), valid until the next put.
  Value* find(DevPtr ptr) {
    if (ptr == kEmpty) return has_reserved_ ? &reserved_value_ : nullptr;
    for (std::size_t i = home(ptr);; i = (i + 1) & mask_) {
      if (slots_[i].ptr == ptr) return &slots_[i].value;
      if (slots_[i].ptr == kEmpty) return nullptr;
    }
  }

  // Removes ptr; false when it is not there.
  bool take(DevPtr ptr, Value& out) {
    if (ptr == kEmpty) {
      if (!has_reserved_) return false;
      has_reserved_ = false;
      out = reserved_value_;
      return true;
    }
    std::size_t i = home(ptr);
    while (slots_[i].ptr != ptr) {
      if (slots_[i].ptr == kEmpty) return false;
      i = (i + 1) & mask_;
    }
    out = slots_[i].value;
    for (std::size_t j = (i + 1) & mask_; slots_[j].ptr != kEmpty; j = (j + 1) & mask_) {
      const std::size_t h = home(slots_[j].ptr);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {  // j's home is not cyclically in (i, j]
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].ptr = kEmpty;
    --size_;
    return true;
  }

  template <class F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_)
      if (s.ptr != kEmpty) f(s.ptr, s.value);
    if (has_reserved_) f(kEmpty, reserved_value_);
  }

 private:
  static constexpr DevPtr kEmpty = ~DevPtr(0);
  struct Slot {
    DevPtr ptr = kEmpty;
    [[no_unique_address]] Value value{};  // (NoValue: no bytes, a slot is the pointer alone)
  };
  static_assert(!std::is_empty_v<Value> || sizeof(Slot) == sizeof(DevPtr));
  // Multiplicative hashing: the top bits of the product depend on every bit of the pointer, so
  // aligned pointers (low bits zero) spread too.
  std::size_t home(DevPtr ptr) const { return std::size_t((ptr * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(std::size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot{});
    mask_ = capacity - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(capacity));
    size_ = 0;
    for (const Slot& s : old)
      if (s.ptr != kEmpty) put(s.ptr, s.value);
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
  bool has_reserved_ = false;  // the one pointer equal to the empty marker
  Value reserved_value_{};
};

}  // namespace gmb
