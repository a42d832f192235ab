// A Device that puts segments where a recording says the driver put them. PyTorch's allocator
// breaks ties between equal-size free blocks by address, so where the driver placed each
// cudaMalloc is an input of its decisions. A snapshot records every segment_alloc with its
// address: replaying it with those addresses makes the simulated run take the same blocks.
//
// Each cudaMalloc takes the next recorded (size, address) while the sizes agree; from the first
// disagreement on (other settings, another allocator), addresses come from the inner device,
// moved above 2^52, where no recorded (user-space) address can be. Memory is still taken from the
// inner device, so its capacity and accounting hold.
#pragma once

#include <unordered_map>
#include <utility>
#include <vector>

#include "devices/device.h"

namespace gmb {

class RecordedPlacementDevice final : public Device {
 public:
  // segments: (bytes, address) of each recorded cudaMalloc, in order.
  RecordedPlacementDevice(std::unique_ptr<Device> inner, std::vector<std::pair<Bytes, DevPtr>> segments)
      : inner_(std::move(inner)), recorded_(std::move(segments)) {}

  bool diverged() const { return diverged_; }
  std::size_t placed() const { return next_; }

  const DeviceInfo& info() const override { return inner_->info(); }

  std::optional<DevPtr> malloc(Bytes bytes) override {
    CounterSync sync(*this);
    auto p = inner_->malloc(bytes);
    if (!p) return p;
    DevPtr outer;
    if (!diverged_ && next_ < recorded_.size() && recorded_[next_].first == bytes) {
      outer = recorded_[next_++].second;
    } else {
      diverged_ = true;
      outer = *p + kMovedBase;
    }
    inner_of_[outer] = *p;
    return outer;
  }
  void free(DevPtr ptr) override {
    CounterSync sync(*this);
    auto it = inner_of_.find(ptr);
    if (it == inner_of_.end()) return inner_->free(ptr);
    DevPtr inner = it->second;
    inner_of_.erase(it);
    inner_->free(inner);
  }
  Bytes vmm_granularity() const override {
    return inner_->vmm_granularity();
  }
  std::optional<DevPtr> reserve_address_range(Bytes bytes) override {
    CounterSync sync(*this);
    return inner_->reserve_address_range(bytes);
  }
  void release_address_range(DevPtr base, Bytes bytes) override {
    CounterSync sync(*this);
    inner_->release_address_range(base, bytes);
  }
  bool map(DevPtr addr, Bytes bytes) override {
    CounterSync sync(*this);
    return inner_->map(addr, bytes);
  }
  void unmap(DevPtr addr, Bytes bytes) override {
    CounterSync sync(*this);
    inner_->unmap(addr, bytes);
  }
  std::optional<DevPtr> malloc_managed(Bytes bytes) override {
    CounterSync sync(*this);
    return inner_->malloc_managed(bytes);
  }
  void free_managed(DevPtr ptr) override {
    CounterSync sync(*this);
    inner_->free_managed(ptr);
  }
  void prefetch_managed(DevPtr ptr, Bytes bytes, StreamId stream) override {
    CounterSync sync(*this);
    inner_->prefetch_managed(ptr, bytes, stream);
  }
  void advise_managed(DevPtr ptr, Bytes bytes, bool preferred, bool accessed_by) override {
    CounterSync sync(*this);
    inner_->advise_managed(ptr, bytes, preferred, accessed_by);
  }
  PoolHandle create_pool(const MemPoolOptions& options) override {
    CounterSync sync(*this);
    return inner_->create_pool(options);
  }
  void destroy_pool(PoolHandle pool) override {
    CounterSync sync(*this);
    inner_->destroy_pool(pool);
  }
  std::optional<DevPtr> malloc_async(PoolHandle pool, Bytes bytes, StreamId stream) override {
    CounterSync sync(*this);
    return inner_->malloc_async(pool, bytes, stream);
  }
  void free_async(PoolHandle pool, DevPtr ptr, StreamId stream) override {
    CounterSync sync(*this);
    inner_->free_async(pool, ptr, stream);
  }
  void trim_pool(PoolHandle pool, Bytes keep_bytes) override {
    CounterSync sync(*this);
    inner_->trim_pool(pool, keep_bytes);
  }
  MemPoolUsage pool_usage(PoolHandle pool) const override {
    return inner_->pool_usage(pool);
  }
  void synchronize() override {
    CounterSync sync(*this);
    inner_->synchronize();
  }
  void* native_stream(StreamId stream) override {
    CounterSync sync(*this);
    return inner_->native_stream(stream);
  }
  Bytes used_bytes() const override {
    return inner_->used_bytes();
  }

 private:
  // Copies the inner device's call counters when a forwarded call returns (the runner reads
  // counters() for the modeled time of device calls).
  struct CounterSync {
    explicit CounterSync(RecordedPlacementDevice& d) : d_(d) {}
    ~CounterSync() { d_.counters_ = d_.inner_->counters(); }
    RecordedPlacementDevice& d_;
  };
  static constexpr DevPtr kMovedBase = DevPtr(1) << 52;
  std::unique_ptr<Device> inner_;
  std::vector<std::pair<Bytes, DevPtr>> recorded_;
  std::size_t next_ = 0;
  bool diverged_ = false;
  std::unordered_map<DevPtr, DevPtr> inner_of_;
};

}  // namespace gmb
