// The device half of the RMM-style logging adaptors: a Device wrapper that reports the segment
// calls an allocator makes (memory taken and given back, pages mapped and unmapped).
#pragma once

#include <optional>
#include <unordered_map>

#include "allocators/adaptors/allocator_event.h"
#include "devices/forwarding_device.h"

namespace gmb {

// Forwards every call to `inner` and reports the segment calls (malloc/free, managed
// malloc/free, map/unmap) to the sink. The inner device counts the calls.
class LoggingDevice final : public ForwardingDevice {
 public:
  LoggingDevice(Device& inner, AllocatorEventSink& sink) : ForwardingDevice(inner), sink_(sink) {}

 private:
  std::optional<DevPtr> do_malloc(Bytes bytes) override { return taken(inner().malloc(bytes), bytes); }
  void do_free(DevPtr ptr) override {
    given_back(ptr);
    inner().free(ptr);
  }
  bool do_map(DevPtr addr, Bytes bytes) override {
    const bool ok = inner().map(addr, bytes);
    if (ok) sink_.on_event({AllocatorEvent::Kind::SegmentMap, addr, bytes, 0});
    return ok;
  }
  void do_unmap(DevPtr addr, Bytes bytes) override {
    sink_.on_event({AllocatorEvent::Kind::SegmentUnmap, addr, bytes, 0});
    inner().unmap(addr, bytes);
  }
  std::optional<DevPtr> do_malloc_managed(Bytes bytes) override { return taken(inner().malloc_managed(bytes), bytes); }
  void do_free_managed(DevPtr ptr) override {
    given_back(ptr);
    inner().free_managed(ptr);
  }
  // Pool allocations are the pool's blocks, not segments: the pool's own growth is the driver's.

  std::optional<DevPtr> taken(std::optional<DevPtr> ptr, Bytes bytes) {
    if (ptr) {
      sizes_[*ptr] = bytes;
      sink_.on_event({AllocatorEvent::Kind::SegmentAlloc, *ptr, bytes, 0});
    }
    return ptr;
  }
  void given_back(DevPtr ptr) {
    auto it = sizes_.find(ptr);
    const Bytes bytes = it == sizes_.end() ? 0 : it->second;
    if (it != sizes_.end()) sizes_.erase(it);
    sink_.on_event({AllocatorEvent::Kind::SegmentFree, ptr, bytes, 0});
  }

  AllocatorEventSink& sink_;
  std::unordered_map<DevPtr, Bytes> sizes_;  // live segments
};

}  // namespace gmb
