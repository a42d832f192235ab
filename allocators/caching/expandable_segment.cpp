#include "allocators/caching/expandable_segment.h"

#include <stdexcept>

namespace gmb::caching {

ExpandableSegment::ExpandableSegment(Device& device, StreamId stream, Bytes segment_size,
                                     Bytes card_bytes)
    : device_(device), stream_(stream), segment_size_(segment_size) {
  Bytes want = card_bytes + card_bytes / 8;
  max_handles_ = static_cast<std::size_t>((want + segment_size_ - 1) / segment_size_);
  auto base = device_.reserve_address_range(segment_size_ * max_handles_);
  if (!base) throw DeviceError("expandable segment: cannot reserve the virtual address range");
  base_ = *base;
}

ExpandableSegment::~ExpandableSegment() {
  std::size_t i = 0;
  while (i < handles_.size()) {
    if (!handles_[i]) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < handles_.size() && handles_[j]) ++j;
    unmap_handles(i, j);
    i = j;
  }
  device_.release_address_range(base_, segment_size_ * max_handles_);
}

SegmentRange ExpandableSegment::map(DevPtr ptr, Bytes size) {
  std::size_t begin = static_cast<std::size_t>((ptr - base_) / segment_size_);
  std::size_t end = static_cast<std::size_t>((ptr + size - base_ + segment_size_ - 1) / segment_size_);
  if (base_ + begin * segment_size_ != ptr)
    throw std::logic_error("expandable segment: map of an unaligned address");
  if (begin == end) return {ptr, 0};
  if (end > handles_.size()) handles_.resize(end, false);
  for (std::size_t i = begin; i < end; ++i) {
    if (handles_[i]) throw std::logic_error("expandable segment: page mapped twice");
    if (!device_.map(base_ + i * segment_size_, segment_size_)) {
      // Out of memory: give back the pages taken by this call (cuMemRelease of the handles).
      for (std::size_t j = begin; j < i; ++j) {
        device_.unmap(base_ + j * segment_size_, segment_size_);
        handles_[j] = false;
      }
      while (!handles_.empty() && !handles_.back()) handles_.pop_back();
      return {base_ + begin * segment_size_, 0};
    }
    handles_[i] = true;
  }
  mapped_bytes_ += (end - begin) * segment_size_;
  return {base_ + begin * segment_size_, (end - begin) * segment_size_};
}

SegmentRange ExpandableSegment::unmap(DevPtr ptr, Bytes size) {
  std::size_t begin = static_cast<std::size_t>((ptr - base_ + segment_size_ - 1) / segment_size_);
  std::size_t end = static_cast<std::size_t>((ptr + size - base_) / segment_size_);
  if (begin >= end) return {ptr, 0};
  unmap_handles(begin, end);
  return {base_ + begin * segment_size_, (end - begin) * segment_size_};
}

void ExpandableSegment::unmap_handles(std::size_t begin, std::size_t end) {
  // cuMemUnmap does not wait for the stream; PyTorch synchronizes it first.
  device_.synchronize();
  for (std::size_t i = begin; i < end; ++i) {
    device_.unmap(base_ + i * segment_size_, segment_size_);
    handles_[i] = false;
  }
  mapped_bytes_ -= (end - begin) * segment_size_;
  while (!handles_.empty() && !handles_.back()) handles_.pop_back();
}

}  // namespace gmb::caching
