// RMM-style logging adaptors: wrap any Allocator (and the Device under it) and report every event
// to a sink as it happens: allocations, frees, failed allocations, and the segment changes the
// allocator makes on the device. The event record is format-neutral: the RMM log export
// (harness/export/rmm_log_writer.h) and a PyTorch snapshot export read the same stream, so the replay
// is never held whole.
#pragma once

#include <memory>
#include <unordered_map>

#include "allocators/allocator.h"
#include "devices/forwarding_device.h"

namespace gmb {

struct AllocatorEvent {
  enum class Kind : std::uint8_t {
    Alloc,         // a block handed out: ptr, bytes (as requested), stream
    Free,          // a block given back: ptr, bytes and stream of its allocation
    AllocFailed,   // an allocation that failed (OOM): bytes, stream; ptr 0
    SegmentAlloc,  // device memory taken: cudaMalloc / cudaMallocManaged / pool growth (ptr, bytes)
    SegmentFree,   // device memory given back (ptr, bytes)
    SegmentMap,    // expandable segments: physical pages mapped at ptr (bytes)
    SegmentUnmap,  // ... and unmapped
  };
  Kind kind = Kind::Alloc;
  DevPtr ptr = 0;
  Bytes bytes = 0;
  StreamId stream = 0;
};

class AllocatorEventSink {
 public:
  virtual ~AllocatorEventSink() = default;
  virtual void on_event(const AllocatorEvent& event) = 0;
};

// Passes events on until closed (a run's own clean-up after the workload is not reported).
class AllocatorEventGate final : public AllocatorEventSink {
 public:
  explicit AllocatorEventGate(AllocatorEventSink& to) : to_(&to) {}
  void on_event(const AllocatorEvent& event) override {
    if (to_) to_->on_event(event);
  }
  void close() { to_ = nullptr; }

 private:
  AllocatorEventSink* to_;
};

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
