// RMM-style logging adaptor: wraps any allocator and reports every allocation, free and failed
// allocation to a sink as it happens. Wrap the allocator's device in a LoggingDevice
// (logging_device.h) as well to see the segment changes the allocator makes.
#pragma once

#include <memory>
#include <unordered_map>

#include "allocators/adaptors/allocator_event.h"
#include "allocators/adaptors/logging_device.h"
#include "allocators/allocator.h"

namespace gmb {

// Forwards every call to `inner` (built on a LoggingDevice when segment events are wanted) and
// reports allocations, frees and failures to the sink.
// Forwards end_of_step too when the inner allocator is StepAware.
class LoggingAllocator final : public InspectableAllocator, public StepAware {
 public:
  LoggingAllocator(std::unique_ptr<InspectableAllocator> inner, AllocatorEventSink& sink)
      : inner_(std::move(inner)), sink_(sink) {}

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    const std::optional<DevPtr> ptr = inner_->allocate(bytes, stream);
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
    inner_->deallocate(ptr);
  }
  void empty_cache() override { inner_->empty_cache(); }
  void end_of_step(std::uint64_t step) override {
    if (StepAware* hook = step_aware(*inner_)) hook->end_of_step(step);
  }
  AllocatorStats stats() const override { return inner_->stats(); }
  MemoryInUse in_use() const override { return inner_->in_use(); }
  OomDetails last_oom() const override { return inner_->last_oom(); }
  std::vector<SegmentInfo> segments() const override { return inner_->segments(); }
  std::vector<SegmentInfo> block_map() const override { return inner_->block_map(); }
  std::vector<std::pair<std::string, std::int64_t>> memory_stats() const override { return inner_->memory_stats(); }
  std::string memory_summary() const override { return inner_->memory_summary(); }

 private:
  struct Live {
    Bytes bytes;
    StreamId stream;
  };
  std::unique_ptr<InspectableAllocator> inner_;
  AllocatorEventSink& sink_;
  std::unordered_map<DevPtr, Live> live_;
};

}  // namespace gmb
