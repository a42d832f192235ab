// One expandable segment (PyTorch's expandable_segments:True): a virtual address range big
// enough for 1 1/8 of the card, mapped and unmapped in fixed-size pages (2 MiB for the small
// pool, large_segment_size (20 MiB) for the large pool) through the device's virtual memory
// calls (cuMemAddressReserve, cuMemCreate + cuMemMap + cuMemSetAccess, cuMemUnmap + cuMemRelease).
#pragma once

#include <vector>

#include "devices/device.h"

namespace gmb::caching {

struct SegmentRange {
  DevPtr ptr = 0;
  Bytes size = 0;
};

class ExpandableSegment {
 public:
  // Reserves segment_size * ceil((card_bytes + card_bytes / 8) / segment_size) bytes of
  // address space. Throws DeviceError where the device cannot reserve it.
  ExpandableSegment(Device& device, StreamId stream, Bytes segment_size, Bytes card_bytes);
  ~ExpandableSegment();
  ExpandableSegment(const ExpandableSegment&) = delete;
  ExpandableSegment& operator=(const ExpandableSegment&) = delete;

  // Maps every page that [ptr, ptr + size) touches; ptr must be page aligned. Returns the
  // range mapped, or size 0 when the device is out of memory (nothing stays mapped then).
  SegmentRange map(DevPtr ptr, Bytes size);
  // Unmaps the pages that lie wholly inside [ptr, ptr + size); returns them (size 0: none).
  SegmentRange unmap(DevPtr ptr, Bytes size);

  DevPtr base() const { return base_; }
  Bytes size() const { return segment_size_ * max_handles_; }
  Bytes segment_size() const { return segment_size_; }
  Bytes mapped_bytes() const { return mapped_bytes_; }
  StreamId stream() const { return stream_; }

 private:
  void unmap_handles(std::size_t begin, std::size_t end);

  Device& device_;
  StreamId stream_;
  Bytes segment_size_;
  std::size_t max_handles_;
  DevPtr base_ = 0;
  Bytes mapped_bytes_ = 0;
  std::vector<bool> handles_;  // page i is mapped (trimmed at the end like PyTorch's handles_)
};

}  // namespace gmb::caching
