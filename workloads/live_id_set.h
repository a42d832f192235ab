// The ids of the buffers a trace has allocated and not yet freed: how trace readers check that
// every free names a live buffer. It holds live ids only, so its size follows the trace's peak
// live set, never its length. Open addressing with linear probing, deletion by backward shift.
#pragma once

#include <cstdint>
#include <vector>

namespace gmb {

class LiveIdSet {
 public:
  LiveIdSet() { rehash(1024); }
  std::size_t size() const { return size_ + (has_empty_key_ ? 1 : 0); }

  // False when id is already live.
  bool insert(std::uint64_t id) {
    if (id == kEmpty) return has_empty_key_ ? false : (has_empty_key_ = true);
    if ((size_ + 1) * 4 > slots_.size() * 3) rehash(slots_.size() * 2);
    std::size_t i = home(id);
    for (; slots_[i] != kEmpty; i = (i + 1) & mask_)
      if (slots_[i] == id) return false;
    slots_[i] = id;
    ++size_;
    return true;
  }

  // False when id is not live.
  bool erase(std::uint64_t id) {
    if (id == kEmpty) return has_empty_key_ ? !(has_empty_key_ = false) : false;
    std::size_t i = home(id);
    while (slots_[i] != id) {
      if (slots_[i] == kEmpty) return false;
      i = (i + 1) & mask_;
    }
    for (std::size_t j = (i + 1) & mask_; slots_[j] != kEmpty; j = (j + 1) & mask_) {
      const std::size_t h = home(slots_[j]);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = kEmpty;
    --size_;
    return true;
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t(0);
  std::size_t home(std::uint64_t id) const { return std::size_t((id * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(std::size_t capacity) {
    std::vector<std::uint64_t> old = std::move(slots_);
    slots_.assign(capacity, kEmpty);
    mask_ = capacity - 1;
    shift_ = 64;
    for (std::size_t c = capacity; c > 1; c >>= 1) --shift_;
    size_ = 0;
    for (std::uint64_t id : old)
      if (id != kEmpty) insert(id);
  }

  std::vector<std::uint64_t> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 64;
  std::size_t size_ = 0;
  bool has_empty_key_ = false;
};

}  // namespace gmb
