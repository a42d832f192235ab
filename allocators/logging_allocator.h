// RMM-style logging adaptors: wrap any Allocator (and the Device under it) and report every event
// to a sink as it happens: allocations, frees, failed allocations, and the segment changes the
// allocator makes on the device. The event record is format-neutral: the RMM log export
// (harness/rmm_log_writer.h) and a PyTorch snapshot export read the same stream, so the replay
// is never held whole.
#pragma once

#include <memory>
#include <unordered_map>

#include "allocators/allocator.h"

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
// malloc/free, map/unmap) to the sink. The inner device keeps the call counters.
class LoggingDevice final : public Device {
 public:
  LoggingDevice(Device& inner, AllocatorEventSink& sink) : inner_(inner), sink_(sink) {}
  const DeviceInfo& info() const override { return inner_.info(); }
  std::optional<DevPtr> malloc(Bytes bytes) override { return taken(inner_.malloc(bytes), bytes); }
  void free(DevPtr ptr) override {
    given_back(ptr);
    inner_.free(ptr);
  }
  Bytes vmm_granularity() const override { return inner_.vmm_granularity(); }
  std::optional<DevPtr> reserve_address_range(Bytes bytes) override { return inner_.reserve_address_range(bytes); }
  void release_address_range(DevPtr base, Bytes bytes) override { inner_.release_address_range(base, bytes); }
  bool map(DevPtr addr, Bytes bytes) override {
    const bool ok = inner_.map(addr, bytes);
    if (ok) sink_.on_event({AllocatorEvent::Kind::SegmentMap, addr, bytes, 0});
    return ok;
  }
  void unmap(DevPtr addr, Bytes bytes) override {
    sink_.on_event({AllocatorEvent::Kind::SegmentUnmap, addr, bytes, 0});
    inner_.unmap(addr, bytes);
  }
  std::optional<DevPtr> malloc_managed(Bytes bytes) override { return taken(inner_.malloc_managed(bytes), bytes); }
  void free_managed(DevPtr ptr) override {
    given_back(ptr);
    inner_.free_managed(ptr);
  }
  void prefetch_managed(DevPtr ptr, Bytes bytes, StreamId stream) override { inner_.prefetch_managed(ptr, bytes, stream); }
  void advise_managed(DevPtr ptr, Bytes bytes, bool preferred, bool accessed_by) override {
    inner_.advise_managed(ptr, bytes, preferred, accessed_by);
  }
  PoolHandle create_pool(const MemPoolOptions& options) override { return inner_.create_pool(options); }
  void destroy_pool(PoolHandle pool) override { inner_.destroy_pool(pool); }
  // Pool allocations are the pool's blocks, not segments: the pool's own growth is the driver's.
  std::optional<DevPtr> malloc_async(PoolHandle pool, Bytes bytes, StreamId stream) override {
    return inner_.malloc_async(pool, bytes, stream);
  }
  void free_async(PoolHandle pool, DevPtr ptr, StreamId stream) override { inner_.free_async(pool, ptr, stream); }
  void trim_pool(PoolHandle pool, Bytes keep_bytes) override { inner_.trim_pool(pool, keep_bytes); }
  MemPoolUsage pool_usage(PoolHandle pool) const override { return inner_.pool_usage(pool); }
  void synchronize() override { inner_.synchronize(); }
  void* native_stream(StreamId stream) override { return inner_.native_stream(stream); }
  Bytes used_bytes() const override { return inner_.used_bytes(); }

 private:
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

  Device& inner_;
  AllocatorEventSink& sink_;
  std::unordered_map<DevPtr, Bytes> sizes_;  // live segments
};

// Forwards every call to `inner` (built on a LoggingDevice when segment events are wanted) and
// reports allocations, frees and failures to the sink.
class LoggingAllocator final : public Allocator {
 public:
  LoggingAllocator(std::unique_ptr<Allocator> inner, AllocatorEventSink& sink) : inner_(std::move(inner)), sink_(sink) {}

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
  void end_of_step(std::uint64_t step) override { inner_->end_of_step(step); }
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
  std::unique_ptr<Allocator> inner_;
  AllocatorEventSink& sink_;
  std::unordered_map<DevPtr, Live> live_;
};

}  // namespace gmb
