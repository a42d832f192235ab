// A Device that passes every call to another device. Wrappers (recording, placing, logging, test
// devices) derive from it and override only the calls they watch or change. Its counters are the
// inner device's: every call that reaches the inner device is counted there, with its modeled time.
#pragma once

#include "devices/device.h"

namespace gmb {

class ForwardingDevice : public Device {
 public:
  explicit ForwardingDevice(Device& inner) : inner_(inner) { report_counters_of(inner); }

  const DeviceInfo& info() const override { return inner_.info(); }
  Bytes vmm_granularity() const override { return inner_.vmm_granularity(); }
  void prefetch_managed(DevPtr ptr, Bytes bytes, StreamId stream) override {
    inner_.prefetch_managed(ptr, bytes, stream);
  }
  void advise_managed(DevPtr ptr, Bytes bytes, bool preferred, bool accessed_by) override {
    inner_.advise_managed(ptr, bytes, preferred, accessed_by);
  }
  PoolHandle create_pool(const MemPoolOptions& options) override { return inner_.create_pool(options); }
  void destroy_pool(PoolHandle pool) override { inner_.destroy_pool(pool); }
  void trim_pool(PoolHandle pool, Bytes keep_bytes) override { inner_.trim_pool(pool, keep_bytes); }
  MemPoolUsage pool_usage(PoolHandle pool) const override { return inner_.pool_usage(pool); }
  void* native_stream(StreamId stream) override { return inner_.native_stream(stream); }
  Bytes used_bytes() const override { return inner_.used_bytes(); }

 protected:
  Device& inner() const { return inner_; }

  std::optional<DevPtr> do_malloc(Bytes bytes) override { return inner_.malloc(bytes); }
  void do_free(DevPtr ptr) override { inner_.free(ptr); }
  std::optional<DevPtr> do_reserve_address_range(Bytes bytes) override { return inner_.reserve_address_range(bytes); }
  void do_release_address_range(DevPtr base, Bytes bytes) override { inner_.release_address_range(base, bytes); }
  bool do_map(DevPtr addr, Bytes bytes) override { return inner_.map(addr, bytes); }
  void do_unmap(DevPtr addr, Bytes bytes) override { inner_.unmap(addr, bytes); }
  std::optional<PhysicalHandle> do_create_physical(Bytes bytes) override { return inner_.create_physical(bytes); }
  void do_release_physical(PhysicalHandle handle) override { inner_.release_physical(handle); }
  void do_map_physical(DevPtr addr, PhysicalHandle handle) override { inner_.map_physical(addr, handle); }
  void do_unmap_physical(DevPtr addr, Bytes bytes) override { inner_.unmap_physical(addr, bytes); }
  std::optional<DevPtr> do_malloc_managed(Bytes bytes) override { return inner_.malloc_managed(bytes); }
  void do_free_managed(DevPtr ptr) override { inner_.free_managed(ptr); }
  std::optional<DevPtr> do_malloc_async(PoolHandle pool, Bytes bytes, StreamId stream) override {
    return inner_.malloc_async(pool, bytes, stream);
  }
  void do_free_async(PoolHandle pool, DevPtr ptr, StreamId stream) override { inner_.free_async(pool, ptr, stream); }
  void do_synchronize() override { inner_.synchronize(); }
  void do_model_kernel(double gpu_seconds, double launch_seconds) override {
    inner_.model_kernel(gpu_seconds, launch_seconds);
  }

 private:
  Device& inner_;
};

}  // namespace gmb
