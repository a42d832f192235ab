// Bookkeeping shared by the allocators that hand every request to the driver
// (cuda_malloc, cuda_managed, cuda_mempool): live pointers, stats, peaks, the last OOM.
#pragma once

#include <algorithm>

#include <fmt/format.h>

#include "allocators/allocator.h"
#include "common/live_map.h"
#include "common/units.h"

namespace gmb {

class TrackingAllocator : public InspectableAllocator {
 public:
  AllocatorStats stats() const override { return stats_; }
  MemoryInUse in_use() const override { return {stats_.allocated_bytes, stats_.reserved_bytes}; }
  OomDetails last_oom() const override { return oom_; }

 protected:
  struct Live {
    Bytes bytes = 0;
    StreamId stream = 0;
  };

  explicit TrackingAllocator(Device& device) : device_(device) {}

  void record_alloc(DevPtr ptr, Bytes bytes, StreamId stream, bool device_alloc) {
    live_.put(ptr, Live{bytes, stream});
    ++stats_.allocs;
    if (device_alloc) ++stats_.device_allocs; else ++stats_.cache_hits;
    stats_.allocated_bytes += bytes;
    stats_.requested_bytes += bytes;
    if (stats_.allocated_bytes > stats_.peak_allocated_bytes)
      stats_.peak_allocated_bytes = stats_.allocated_bytes;
  }

  // Forgets ptr; returns what it was, or nullopt for an unknown pointer.
  std::optional<Live> record_free(DevPtr ptr, bool device_free) {
    Live l;
    if (!live_.take(ptr, l)) return std::nullopt;
    ++stats_.frees;
    if (device_free) ++stats_.device_frees;
    stats_.allocated_bytes -= l.bytes;
    stats_.requested_bytes -= l.bytes;
    return l;
  }

  // A request larger than the whole device is refused before the driver or any rounding sees
  // it: the same capacity OOM on every allocator, and no size arithmetic near 2^64.
  bool refuse_larger_than_device(Bytes bytes, const char* call) {
    const DeviceInfo& info = device_.info();
    const Bytes device = std::max(info.total_bytes, info.capacity_bytes);
    if (bytes <= device) return false;
    record_oom(bytes, fmt::format("{} of {} refused: larger than the whole device ({})", call,
                                  format_bytes(bytes), format_bytes(device)));
    return true;
  }

  void set_reserved(Bytes reserved, std::uint64_t segments) {
    stats_.reserved_bytes = reserved;
    stats_.segments = segments;
    if (reserved > stats_.peak_reserved_bytes) stats_.peak_reserved_bytes = reserved;
  }

  void record_oom(Bytes bytes, std::string message) {
    ++stats_.ooms;
    oom_ = OomDetails{};
    oom_.requested_bytes = bytes;
    oom_.allocated_bytes = stats_.allocated_bytes;
    oom_.reserved_bytes = stats_.reserved_bytes;
    oom_.cached_bytes =
        stats_.reserved_bytes > stats_.allocated_bytes ? stats_.reserved_bytes - stats_.allocated_bytes : 0;
    oom_.message = std::move(message);
  }

  Device& device_;
  AllocatorStats stats_;
  OomDetails oom_;
  LiveMap<Live> live_;
};

}  // namespace gmb
