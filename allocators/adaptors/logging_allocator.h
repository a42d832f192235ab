// RMM-style logging adaptor: wraps any allocator and reports every allocation, free and failed
// allocation to a sink as it happens. Wrap the allocator's device in a LoggingDevice
// (logging_device.h) as well to see the segment changes the allocator makes.
#pragma once

#include <memory>
#include <unordered_map>

#include "allocators/adaptors/allocator_event.h"
#include "allocators/adaptors/logging_device.h"
#include "allocators/adaptors/forwarding_allocator.h"

namespace gmb {

// Forwards every call to `inner` (built on a LoggingDevice when segment events are wanted) and
// reports allocations, frees and failures to the sink.
class LoggingAllocator final : public ForwardingAllocator {
 public:
  LoggingAllocator(std::unique_ptr<InspectableAllocator> inner, AllocatorEventSink& sink)
      : ForwardingAllocator(std::move(inner)), sink_(sink) {}

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    const std::optional<DevPtr> ptr = ForwardingAllocator::allocate(bytes, stream);
    if (ptr) {
      live_[*ptr] = {bytes, stream};
      sink_.on_event({AllocatorEvent::Kind::Alloc, *ptr, bytes, stream});
    } else {
      sink_.on_event({AllocatorEvent::Kind::AllocFailed, 0, bytes, stream});
    }
    return ptr;
  }
  void deallocate(DevPtr ptr) override {
    auto it = live_.find(ptr);
    AllocatorEvent e{AllocatorEvent::Kind::Free, ptr, 0, 0};
    if (it != live_.end()) {
      e.bytes = it->second.bytes;
      e.stream = it->second.stream;
      live_.erase(it);
    }
    sink_.on_event(e);
    ForwardingAllocator::deallocate(ptr);
  }

 private:
  struct Live {
    Bytes bytes;
    StreamId stream;
  };
  AllocatorEventSink& sink_;
  std::unordered_map<DevPtr, Live> live_;
};

}  // namespace gmb
