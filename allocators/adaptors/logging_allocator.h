// RMM-style logging adaptor: wraps any allocator and reports every allocation, free and failed
// allocation to a sink as it happens. Wrap the allocator's device in a LoggingDevice
// (logging_device.h) as well to see the segment changes the allocator makes.
#pragma once

#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

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
    log_returned_early();  // inside the call, before its own row
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
  void empty_cache() override {
    ForwardingAllocator::empty_cache();
    log_returned_early();
  }
  // Those the inner allocator took back: logged as frees when it did, kept for the caller.
  std::vector<DevPtr> take_returned_early() override { return std::exchange(returned_early_, {}); }

 private:
  struct Live {
    Bytes bytes;
    StreamId stream;
  };
  void log_returned_early() {
    for (DevPtr p : ForwardingAllocator::take_returned_early()) {
      AllocatorEvent e{AllocatorEvent::Kind::Free, p, 0, 0};
      if (auto it = live_.find(p); it != live_.end()) {
        e.bytes = it->second.bytes;
        e.stream = it->second.stream;
        live_.erase(it);
      }
      sink_.on_event(e);
      returned_early_.push_back(p);
    }
  }
  AllocatorEventSink& sink_;
  std::unordered_map<DevPtr, Live> live_;
  std::vector<DevPtr> returned_early_;
};

}  // namespace gmb
