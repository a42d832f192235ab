// What an allocator may ask the GPU for. Two implementations: the real CUDA device
// (cuda_device.cpp) and the deterministic simulated device (sim_device.cpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <memory>
#include <optional>
#include <string>

#include "common/types.h"

namespace gmb {

enum class DeviceKind { Sim, Cuda };
const char* to_string(DeviceKind kind);

struct DeviceInfo {
  DeviceKind kind = DeviceKind::Sim;
  std::string name;
  Bytes capacity_bytes = 0;   // what the allocator under test may use (sim: the device size)
  Bytes total_bytes = 0;      // the physical card (sim: card_bytes, at least capacity_bytes)
  Bytes ballast_bytes = 0;    // cuda: bytes taken up front so only capacity_bytes is left
  Bytes page_bytes = 2 * MiB; // driver page granularity
  std::string driver;         // cuda: driver/runtime versions
  std::string uuid;           // cuda: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (as nvidia-smi)
  int ordinal = 0;            // the number messages name the GPU by ("GPU 1"); cuda: 0, the first visible
};

// Calls into the driver, counted by every device. Sim devices also accumulate modeled
// host time for each call (medians measured on the H200 by scripts/probe/driver_probe.cu, results/h200/probe/) so throughput can be modeled.
struct DeviceCounters {
  std::uint64_t mallocs = 0, frees = 0;
  std::uint64_t vmm_maps = 0, vmm_unmaps = 0;
  // The driver's virtual memory calls one by one (vmm_stitch): cuMemAddressReserve/Free,
  // cuMemCreate/cuMemRelease of a physical handle, cuMemMap(+cuMemSetAccess)/cuMemUnmap of one.
  std::uint64_t address_reserves = 0, address_frees = 0;
  std::uint64_t handle_creates = 0, handle_releases = 0, handle_maps = 0, handle_unmaps = 0;
  std::uint64_t managed_mallocs = 0, managed_frees = 0;
  std::uint64_t async_mallocs = 0, async_frees = 0;
  std::uint64_t synchronizes = 0;
  // Sim only: modeled host time spent in the calls above, waits for the GPU included.
  double modeled_call_seconds = 0;
  // Sim only: the modeled timeline (devices/step_time_model.h), in seconds since the device was
  // made: where the host thread is, and when the GPU's stream runs out of queued work. Kernels
  // and prefetches queue GPU work; a call that waits for the GPU (cudaFree, a synchronize) moves
  // the host to gpu_end first.
  double modeled_host_seconds = 0;
  double modeled_gpu_end_seconds = 0;
  double modeled_elapsed_seconds() const {
    return modeled_host_seconds > modeled_gpu_end_seconds ? modeled_host_seconds : modeled_gpu_end_seconds;
  }
};

// Options of a cudaMemPool (cudaMemPoolCreate + attributes).
struct MemPoolOptions {
  Bytes release_threshold = UINT64_MAX;  // cudaMemPoolAttrReleaseThreshold (CUDA default is 0)
  bool reuse_follow_event_dependencies = true;
  bool reuse_allow_opportunistic = true;
  bool reuse_allow_internal_dependencies = true;
};

struct MemPoolUsage {
  Bytes reserved_current = 0, reserved_high = 0;  // cudaMemPoolAttrReservedMem*
  Bytes used_current = 0, used_high = 0;          // cudaMemPoolAttrUsedMem*
};

// Every driver call an allocator makes goes through this interface. The calls that
// DeviceCounters counts are non-virtual: the base counts each one here, in one place, then calls
// the implementation's do_*(); an implementation adds only its modeled time
// (add_modeled_call_seconds). A device that wraps another derives from ForwardingDevice
// (devices/forwarding_device.h) and reports the wrapped device's counters.
class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceInfo& info() const = 0;
  bool simulated() const { return info().kind == DeviceKind::Sim; }
  const DeviceCounters& counters() const { return counted_->counters_; }

  // cudaMalloc / cudaFree. nullopt: out of memory (never throws for OOM).
  std::optional<DevPtr> malloc(Bytes bytes) {
    ++counters_.mallocs;
    return do_malloc(bytes);
  }
  void free(DevPtr ptr) {
    ++counters_.frees;
    do_free(ptr);
  }

  // Virtual memory management (cuMemAddressReserve, cuMemCreate+cuMemMap+cuMemSetAccess,
  // cuMemUnmap+cuMemRelease, cuMemAddressFree). map() returns false when physical memory
  // is exhausted. Addresses and sizes are multiples of vmm_granularity().
  virtual Bytes vmm_granularity() const = 0;
  std::optional<DevPtr> reserve_address_range(Bytes bytes) {
    ++counters_.address_reserves;
    return do_reserve_address_range(bytes);
  }
  void release_address_range(DevPtr base, Bytes bytes) {
    ++counters_.address_frees;
    do_release_address_range(base, bytes);
  }
  bool map(DevPtr addr, Bytes bytes) {
    ++counters_.vmm_maps;
    return do_map(addr, bytes);
  }
  void unmap(DevPtr addr, Bytes bytes) {
    ++counters_.vmm_unmaps;
    do_unmap(addr, bytes);
  }

  // The same calls one at a time, for allocators that map one physical allocation at several
  // addresses (vmm_stitch). create_physical: cuMemCreate of `bytes` (a multiple of
  // vmm_granularity()) of device memory, nullopt when it is exhausted; release_physical:
  // cuMemRelease (the memory goes back once no mapping of it is left). map_physical: cuMemMap of
  // the whole handle at addr (inside a reserved range) and cuMemSetAccess read/write for this
  // GPU; unmap_physical: cuMemUnmap of exactly one such mapping. cuMemUnmap does not wait for
  // work still using the memory: the caller synchronizes first.
  using PhysicalHandle = std::uint64_t;
  std::optional<PhysicalHandle> create_physical(Bytes bytes) {
    ++counters_.handle_creates;
    return do_create_physical(bytes);
  }
  void release_physical(PhysicalHandle handle) {
    ++counters_.handle_releases;
    do_release_physical(handle);
  }
  void map_physical(DevPtr addr, PhysicalHandle handle) {
    ++counters_.handle_maps;
    do_map_physical(addr, handle);
  }
  void unmap_physical(DevPtr addr, Bytes bytes) {
    ++counters_.handle_unmaps;
    do_unmap_physical(addr, bytes);
  }

  // cudaMallocManaged / cudaFree of managed memory (the allocator enforces the safety cap).
  std::optional<DevPtr> malloc_managed(Bytes bytes) {
    ++counters_.managed_mallocs;
    return do_malloc_managed(bytes);
  }
  void free_managed(DevPtr ptr) {
    ++counters_.managed_frees;
    do_free_managed(ptr);
  }
  // cudaMemPrefetchAsync to the device / cudaMemAdvise(preferred location device, accessed by device)
  virtual void prefetch_managed(DevPtr ptr, Bytes bytes, StreamId stream) = 0;
  virtual void advise_managed(DevPtr ptr, Bytes bytes, bool preferred_location, bool accessed_by) = 0;

  // One explicitly created cudaMemPool per handle.
  using PoolHandle = int;
  virtual PoolHandle create_pool(const MemPoolOptions& options) = 0;
  virtual void destroy_pool(PoolHandle pool) = 0;
  std::optional<DevPtr> malloc_async(PoolHandle pool, Bytes bytes, StreamId stream) {
    ++counters_.async_mallocs;
    return do_malloc_async(pool, bytes, stream);
  }
  void free_async(PoolHandle pool, DevPtr ptr, StreamId stream) {
    ++counters_.async_frees;
    do_free_async(pool, ptr, stream);
  }
  virtual void trim_pool(PoolHandle pool, Bytes keep_bytes) = 0;
  virtual MemPoolUsage pool_usage(PoolHandle pool) const = 0;

  void synchronize() {
    ++counters_.synchronizes;
    do_synchronize();
  }
  // A kernel the workload launched: gpu_seconds of work on the stream, launched by a host call
  // of launch_seconds. Sim: placed on the modeled timeline; cuda: nothing (the work really ran).
  void model_kernel(double gpu_seconds, double launch_seconds) { do_model_kernel(gpu_seconds, launch_seconds); }

  // The native stream handle for a StreamId (cudaStream_t on cuda, nullptr on sim).
  virtual void* native_stream(StreamId stream) = 0;

  // Physical device memory taken since the device was created (cuda: cudaMemGetInfo delta).
  virtual Bytes used_bytes() const = 0;

 protected:
  // Sim devices: the modeled host time of the call being made.
  void add_modeled_call_seconds(double seconds) {
    counters_.modeled_call_seconds += seconds;
    counters_.modeled_host_seconds += seconds;
  }
  // Sim devices: the call being made waits until the GPU has run everything queued (its wait is
  // part of the call's time).
  void wait_for_modeled_gpu() {
    if (counters_.modeled_gpu_end_seconds > counters_.modeled_host_seconds)
      add_modeled_call_seconds(counters_.modeled_gpu_end_seconds - counters_.modeled_host_seconds);
  }
  // Sim devices: GPU work queued now (by the host, at its current time) on the stream.
  void queue_modeled_gpu_seconds(double seconds) {
    counters_.modeled_gpu_end_seconds =
        (counters_.modeled_gpu_end_seconds > counters_.modeled_host_seconds ? counters_.modeled_gpu_end_seconds
                                                                            : counters_.modeled_host_seconds) +
        seconds;
  }
  // Sim devices: host time outside the allocator's calls (a kernel launch).
  void add_modeled_host_seconds(double seconds) { counters_.modeled_host_seconds += seconds; }
  // A forwarding device reports the counters of the device its calls reach (which counts them
  // and holds their modeled time); its own are never read.
  void report_counters_of(const Device& inner) { counted_ = inner.counted_; }

 private:
  virtual std::optional<DevPtr> do_malloc(Bytes bytes) = 0;
  virtual void do_free(DevPtr ptr) = 0;
  virtual std::optional<DevPtr> do_reserve_address_range(Bytes bytes) = 0;
  virtual void do_release_address_range(DevPtr base, Bytes bytes) = 0;
  virtual bool do_map(DevPtr addr, Bytes bytes) = 0;
  virtual void do_unmap(DevPtr addr, Bytes bytes) = 0;
  virtual std::optional<PhysicalHandle> do_create_physical(Bytes bytes) = 0;
  virtual void do_release_physical(PhysicalHandle handle) = 0;
  virtual void do_map_physical(DevPtr addr, PhysicalHandle handle) = 0;
  virtual void do_unmap_physical(DevPtr addr, Bytes bytes) = 0;
  virtual std::optional<DevPtr> do_malloc_managed(Bytes bytes) = 0;
  virtual void do_free_managed(DevPtr ptr) = 0;
  virtual std::optional<DevPtr> do_malloc_async(PoolHandle pool, Bytes bytes, StreamId stream) = 0;
  virtual void do_free_async(PoolHandle pool, DevPtr ptr, StreamId stream) = 0;
  virtual void do_synchronize() = 0;
  virtual void do_model_kernel(double /*gpu_seconds*/, double /*launch_seconds*/) {}

  DeviceCounters counters_;
  const Device* counted_ = this;
};

// The H200's memory as the driver reports it (cudaMemGetInfo total, PyTorch's total_memory).
inline constexpr Bytes kH200CardBytes = 150109880320ULL;

struct SimDeviceOptions {
  Bytes capacity_bytes = kH200CardBytes;  // the H200's whole memory (139.80 GiB), unless a capacity is given
  Bytes card_bytes = 0;  // the physical card the capacity is left on (total_bytes); 0: the capacity
  Bytes page_bytes = 2 * MiB;
  std::string name = "simulated H200-like GPU";
  int ordinal = 0;  // DeviceInfo::ordinal: a snapshot's replay names the recorded GPU
};

std::unique_ptr<Device> make_sim_device(const SimDeviceOptions& options);
// For tests: "" when the sim's pool `pool` keeps its free lists consistent (the recent frees and
// the settled ranges disjoint, each in address order and merged, together exactly the free
// memory between live blocks; pending ranges among the recent frees), else what is not.
// Throws DeviceError unless `sim` is a sim device (make_sim_device) and `pool` one of its pools.
std::string sim_pool_consistency(const Device& sim, int pool);
// The info a sim device made with these options reports, without making one.
DeviceInfo sim_device_info(const SimDeviceOptions& options);
// capacity_bytes = 0: the whole card. Throws DeviceError when no GPU is usable or the
// capacity cannot be left free. Defined only when built with CUDA.
std::unique_ptr<Device> make_cuda_device(Bytes capacity_bytes);
bool cuda_device_available();
// The GPUs this process sees (CUDA_VISIBLE_DEVICES applies); 0 without a driver or a CUDA build.
// Creates no context (a sweep's coordinator must not hold memory on a GPU its workers use).
int cuda_device_count();
// The GPU's name, driver, page size and memory without taking any (capacity_bytes: the free
// memory now). Throws DeviceError when no GPU is usable.
DeviceInfo cuda_device_info();

struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The card ran out of memory outside the allocator under test: a library's own setup (the
// cuBLAS handle) asked the driver for memory and got none. The runner records it as the case's
// OOM (a capacity OOM: the card cannot hold even the libraries), not as an error.
struct DeviceOutOfMemory : DeviceError {
  using DeviceError::DeviceError;
};

}  // namespace gmb
