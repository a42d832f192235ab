// A Device that forwards every call to another and records the memory calls an allocator made:
// cudaMalloc / cudaFree of segments, and the map / unmap of expandable-segment pages. The
// snapshot self-check compares them with the segment_* events PyTorch recorded.
//
// A map that fails takes back the pages the same allocator call had mapped (as PyTorch's
// ExpandableSegment::map does on OOM, recording nothing): those maps and unmaps cancel and are
// not recorded.
#pragma once

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "devices/device.h"
#include "devices/device_call.h"

namespace gmb {

class RecordingDevice final : public Device {
 public:
  explicit RecordingDevice(Device& inner) : inner_(inner) {}

  const std::vector<DeviceCall>& calls() const { return calls_; }
  void set_mark(std::uint64_t mark) {
    mark_ = mark;
    rollback_.clear();
  }

  const DeviceInfo& info() const override { return inner_.info(); }

  std::optional<DevPtr> malloc(Bytes bytes) override {
    CounterSync sync(*this);
    auto p = inner_.malloc(bytes);
    if (p) {
      sizes_[*p] = bytes;
      calls_.push_back({DeviceCall::Kind::Malloc, bytes, *p, mark_});
    }
    return p;
  }
  void free(DevPtr ptr) override {
    CounterSync sync(*this);
    auto it = sizes_.find(ptr);
    calls_.push_back({DeviceCall::Kind::Free, it == sizes_.end() ? 0 : it->second, ptr, mark_});
    if (it != sizes_.end()) sizes_.erase(it);
    inner_.free(ptr);
  }
  Bytes vmm_granularity() const override {
    return inner_.vmm_granularity();
  }
  std::optional<DevPtr> reserve_address_range(Bytes bytes) override {
    CounterSync sync(*this);
    return inner_.reserve_address_range(bytes);
  }
  void release_address_range(DevPtr base, Bytes bytes) override {
    CounterSync sync(*this);
    inner_.release_address_range(base, bytes);
  }
  bool map(DevPtr addr, Bytes bytes) override {
    CounterSync sync(*this);
    if (!inner_.map(addr, bytes)) {
      // The pages this call mapped just before, contiguous up to here, are about to be taken back.
      DevPtr end = addr;
      while (!calls_.empty() && calls_.back().kind == DeviceCall::Kind::Map && calls_.back().mark == mark_ &&
             calls_.back().address + calls_.back().bytes == end) {
        end = calls_.back().address;
        rollback_.insert(calls_.back().address);
        calls_.pop_back();
      }
      return false;
    }
    calls_.push_back({DeviceCall::Kind::Map, bytes, addr, mark_});
    return true;
  }
  void unmap(DevPtr addr, Bytes bytes) override {
    CounterSync sync(*this);
    if (!rollback_.erase(addr)) calls_.push_back({DeviceCall::Kind::Unmap, bytes, addr, mark_});
    inner_.unmap(addr, bytes);
  }
  std::optional<DevPtr> malloc_managed(Bytes bytes) override {
    CounterSync sync(*this);
    return inner_.malloc_managed(bytes);
  }
  void free_managed(DevPtr ptr) override {
    CounterSync sync(*this);
    inner_.free_managed(ptr);
  }
  void prefetch_managed(DevPtr ptr, Bytes bytes, StreamId stream) override {
    CounterSync sync(*this);
    inner_.prefetch_managed(ptr, bytes, stream);
  }
  void advise_managed(DevPtr ptr, Bytes bytes, bool preferred, bool accessed_by) override {
    CounterSync sync(*this);
    inner_.advise_managed(ptr, bytes, preferred, accessed_by);
  }
  PoolHandle create_pool(const MemPoolOptions& options) override {
    CounterSync sync(*this);
    return inner_.create_pool(options);
  }
  void destroy_pool(PoolHandle pool) override {
    CounterSync sync(*this);
    inner_.destroy_pool(pool);
  }
  std::optional<DevPtr> malloc_async(PoolHandle pool, Bytes bytes, StreamId stream) override {
    CounterSync sync(*this);
    return inner_.malloc_async(pool, bytes, stream);
  }
  void free_async(PoolHandle pool, DevPtr ptr, StreamId stream) override {
    CounterSync sync(*this);
    inner_.free_async(pool, ptr, stream);
  }
  void trim_pool(PoolHandle pool, Bytes keep_bytes) override {
    CounterSync sync(*this);
    inner_.trim_pool(pool, keep_bytes);
  }
  MemPoolUsage pool_usage(PoolHandle pool) const override {
    return inner_.pool_usage(pool);
  }
  void synchronize() override {
    CounterSync sync(*this);
    inner_.synchronize();
  }
  void* native_stream(StreamId stream) override {
    CounterSync sync(*this);
    return inner_.native_stream(stream);
  }
  Bytes used_bytes() const override {
    return inner_.used_bytes();
  }

 private:
  // Copies the inner device's call counters when a forwarded call returns (the runner reads
  // counters() for the modeled time of device calls).
  struct CounterSync {
    explicit CounterSync(RecordingDevice& d) : d_(d) {}
    ~CounterSync() { d_.counters_ = d_.inner_.counters(); }
    RecordingDevice& d_;
  };
  Device& inner_;
  std::vector<DeviceCall> calls_;
  std::unordered_map<DevPtr, Bytes> sizes_;
  std::unordered_set<DevPtr> rollback_;
  std::uint64_t mark_ = 0;
};

}  // namespace gmb
