// The real GPU through the CUDA runtime and driver APIs. A capacity is enforced with a
// ballast allocation made up front, so the allocator under test meets real driver OOMs.
#include <cuda.h>
#include <cuda_runtime.h>


#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "devices/cuda_path.h"
#include "devices/call_log_file.h"
#include "devices/device.h"

namespace gmb {
namespace {

// The driver API is reached through the runtime's entry-point query rather than by linking
// libcuda, so the binary starts (and falls back to sim) on machines without a driver.
struct DriverApi {
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
};

template <typename F>
void load_symbol(const char* name, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  cudaError_t err = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status);
  if (err != cudaSuccess || status != cudaDriverEntryPointSuccess || !p)
    throw DeviceError(fmt::format("driver entry point {} not found", name));
  fn = reinterpret_cast<F>(p);
}

const DriverApi& cu() {
  static const DriverApi api = [] {
    DriverApi a;
    load_symbol("cuMemAddressReserve", a.mem_address_reserve);
    load_symbol("cuMemAddressFree", a.mem_address_free);
    load_symbol("cuMemCreate", a.mem_create);
    load_symbol("cuMemMap", a.mem_map);
    load_symbol("cuMemSetAccess", a.mem_set_access);
    load_symbol("cuMemUnmap", a.mem_unmap);
    load_symbol("cuMemRelease", a.mem_release);
    load_symbol("cuMemGetAllocationGranularity", a.mem_get_allocation_granularity);
    load_symbol("cuGetErrorString", a.get_error_string);
    return a;
  }();
  return api;
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw DeviceError(fmt::format("{} failed: {} ({})", what, cudaGetErrorString(err),
                                  static_cast<int>(err)));
}

void check(CUresult res, const char* what) {
  if (res != CUDA_SUCCESS) {
    const char* msg = nullptr;
    cu().get_error_string(res, &msg);
    throw DeviceError(fmt::format("{} failed: {} ({})", what, msg ? msg : "?", static_cast<int>(res)));
  }
}

bool is_oom(cudaError_t err) { return err == cudaErrorMemoryAllocation; }
bool is_oom(CUresult res) { return res == CUDA_ERROR_OUT_OF_MEMORY; }

// GPU 0 as it is now (a context is created; no memory is taken): capacity_bytes is the free memory.
DeviceInfo query_device() {
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree(0) (context creation)");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  DeviceInfo info;
  info.kind = DeviceKind::Cuda;
  info.name = prop.name;
  {
    const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    info.uuid = "GPU-";
    for (int i = 0; i < 16; ++i) info.uuid += fmt::format("{}{:02x}", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
  }
  info.total_bytes = total;
  info.capacity_bytes = free;
  info.driver = fmt::format("CUDA driver API {}.{}, runtime {}.{}", driver / 1000,
                            (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10);
  CUmemAllocationProp vmm{};
  vmm.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  vmm.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  vmm.location.id = 0;
  size_t gran = 0;
  check(cu().mem_get_allocation_granularity(&gran, &vmm, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity");
  info.page_bytes = gran;
  return info;
}

// A diagnostic, not a result: with GMB_CUDA_CALL_LOG=PATH each device writes a CallLogFile
// (devices/call_log_file.h: PATH.<pid>, or PATH.<pid>.<n> for a process's n-th), one row per cudaMalloc / cudaFree / cudaMallocFromPoolAsync / cudaFreeAsync: call, bytes (a free's
// are its malloc's), ok, wait_us, call_us, ptr (the pointer returned or freed), pool_reserved (the
// pool's ReservedMemCurrent after a pool call, else 0), t_us (when the call began, from the log's
// start), frees_done (how many of the logged cudaFreeAsync calls the GPU had reached when the call
// began: an event recorded after each, queried in order; one stream assumed).
// A `launch` row follows each compute op the runner launched (its t_us: when the launch returned).
// With GMB_CUDA_CALL_LOG_SYNC=1 a cudaDeviceSynchronize, timed as wait_us, comes before each call,
// so call_us is the call's own cost rather than its wait for queued kernels (this changes the
// run's timing; its memory decisions stay the same).
class CallLog {
 public:
  CallLog() {
    if (!file_.on()) return;
    const char* sync = std::getenv("GMB_CUDA_CALL_LOG_SYNC");
    sync_ = sync && *sync && *sync != '0';
    opened_ = std::chrono::steady_clock::now();
  }
  ~CallLog() {
    for (cudaEvent_t e : pending_) cudaEventDestroy(e);
    for (cudaEvent_t e : spare_) cudaEventDestroy(e);
  }
  bool on() const { return file_.on(); }
  // Call before the CUDA call: the wait (microseconds) when synchronizing first; starts the clock.
  double begin(bool may_sync = true) {
    double wait = 0;
    if (sync_ && may_sync) {
      auto t0 = std::chrono::steady_clock::now();
      cudaDeviceSynchronize();
      wait = micros_since(t0);
    }
    while (!pending_.empty() && cudaEventQuery(pending_.front()) == cudaSuccess) {
      spare_.push_back(pending_.front());
      pending_.pop_front();
      ++frees_done_;
    }
    cudaGetLastError();  // cudaEventQuery's cudaErrorNotReady is not an error
    start_ = std::chrono::steady_clock::now();
    return wait;
  }
  // After a cudaFreeAsync on `stream`: an event marks where the GPU reaches it.
  void note_free(cudaStream_t stream) {
    cudaEvent_t e = nullptr;
    if (!spare_.empty()) {
      e = spare_.back();
      spare_.pop_back();
    } else if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      throw DeviceError("GMB_CUDA_CALL_LOG: cudaEventCreateWithFlags failed");
    }
    if (cudaEventRecord(e, stream) != cudaSuccess) throw DeviceError("GMB_CUDA_CALL_LOG: cudaEventRecord failed");
    pending_.push_back(e);
  }
  // A free's bytes are those of the malloc that returned `ptr`.
  void end(const char* call, Bytes bytes, bool ok, double wait, DevPtr ptr, cudaMemPool_t pool = nullptr) {
    const double us = micros_since(start_);
    std::uint64_t reserved = 0;  // the pool's ReservedMemCurrent after a pool call
    if (pool) cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
    file_.row(call, bytes, ok, wait, us, ptr, reserved,
              std::chrono::duration<double, std::micro>(start_ - opened_).count(), frees_done_);
  }

 private:
  static double micros_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  CallLogFile file_;
  bool sync_ = false;
  std::chrono::steady_clock::time_point opened_, start_;
  std::deque<cudaEvent_t> pending_;  // events after logged frees the GPU has not reached, in order
  std::vector<cudaEvent_t> spare_;
  std::uint64_t frees_done_ = 0;
};

// A diagnostic, not a result: with GMB_CUDA_POOL_CALL_DELAY_US=N every cudaMallocFromPoolAsync
// and cudaFreeAsync is preceded by N microseconds of host work (a spin), so that the host runs
// less far ahead of the GPU. The pool's placements depend on which frees the GPU has reached
// (docs/STEP_TIME.md); this shows how much its peak and its OOMs move with the host's speed.
class PoolCallDelay {
 public:
  void operator()() const {
    if (seconds_ <= 0) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds_);
    while (std::chrono::steady_clock::now() < until) {
    }
  }

 private:
  double seconds_ = pool_call_delay_seconds_from_environment();
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(Bytes capacity) {
    info_ = query_device();
    granularity_ = info_.page_bytes;
    size_t free = info_.capacity_bytes, total = info_.total_bytes;
    if (capacity != 0 && capacity < free) {
      Bytes ballast = free - capacity;
      void* p = nullptr;
      check(cudaMalloc(&p, ballast), "cudaMalloc (ballast)");
      ballast_ = p;
      info_.ballast_bytes = ballast;
      check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    } else if (capacity > free) {
      throw DeviceError(fmt::format("capacity {} bytes asked for, but only {} bytes are free on {}",
                                    capacity, free, info_.name));
    }
    baseline_free_ = free;
    info_.capacity_bytes = free;  // what is really left to the allocator under test
  }

  ~CudaDevice() override {
    cudaDeviceSynchronize();
    for (auto& [id, s] : streams_) cudaStreamDestroy(static_cast<cudaStream_t>(s));
    for (auto& [h, pool] : pools_) cudaMemPoolDestroy(pool);
    for (auto& [id, handle] : physical_) cu().mem_release(handle.first);
    if (ballast_) cudaFree(ballast_);
  }

  const DeviceInfo& info() const override { return info_; }

  std::optional<DevPtr> do_malloc(Bytes bytes) override {
    void* p = nullptr;
    const double wait = log_.on() ? log_.begin() : 0;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (log_.on()) log_.end("malloc", bytes, err == cudaSuccess, wait, reinterpret_cast<DevPtr>(p));
    if (is_oom(err)) {
      cudaGetLastError();  // clear the sticky-free error state
      return std::nullopt;
    }
    check(err, "cudaMalloc");
    return reinterpret_cast<DevPtr>(p);
  }

  void do_free(DevPtr ptr) override {
    if (!log_.on()) return check(cudaFree(reinterpret_cast<void*>(ptr)), "cudaFree");
    const double wait = log_.begin();
    cudaError_t err = cudaFree(reinterpret_cast<void*>(ptr));
    log_.end("free", 0, err == cudaSuccess, wait, ptr);
    check(err, "cudaFree");
  }

  Bytes vmm_granularity() const override { return granularity_; }

  std::optional<DevPtr> do_reserve_address_range(Bytes bytes) override {
    CUdeviceptr p = 0;
    CUresult r = cu().mem_address_reserve(&p, bytes, 0, 0, 0);
    if (is_oom(r)) return std::nullopt;
    check(r, "cuMemAddressReserve");
    return static_cast<DevPtr>(p);
  }

  void do_release_address_range(DevPtr base, Bytes bytes) override {
    check(cu().mem_address_free(static_cast<CUdeviceptr>(base), bytes), "cuMemAddressFree");
  }

  bool do_map(DevPtr addr, Bytes bytes) override {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle handle{};
    CUresult r = cu().mem_create(&handle, bytes, &prop, 0);
    if (is_oom(r)) return false;
    check(r, "cuMemCreate");
    check(cu().mem_map(static_cast<CUdeviceptr>(addr), bytes, 0, handle, 0), "cuMemMap");
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check(cu().mem_set_access(static_cast<CUdeviceptr>(addr), bytes, &access, 1), "cuMemSetAccess");
    handles_[addr] = {handle, bytes};
    return true;
  }

  void do_unmap(DevPtr addr, Bytes bytes) override {
    // Unmapping must wait for work that may still use the memory, as PyTorch does.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    for (auto it = handles_.lower_bound(addr); it != handles_.end() && it->first < addr + bytes;) {
      check(cu().mem_unmap(static_cast<CUdeviceptr>(it->first), it->second.second), "cuMemUnmap");
      check(cu().mem_release(it->second.first), "cuMemRelease");
      it = handles_.erase(it);
    }
  }

  std::optional<PhysicalHandle> do_create_physical(Bytes bytes) override {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle handle{};
    CUresult r = cu().mem_create(&handle, bytes, &prop, 0);
    if (is_oom(r)) return std::nullopt;
    check(r, "cuMemCreate");
    const PhysicalHandle id = ++physical_seq_;
    physical_[id] = {handle, bytes};
    return id;
  }

  void do_release_physical(PhysicalHandle id) override {
    auto it = physical_.find(id);
    if (it == physical_.end()) throw DeviceError(fmt::format("cuMemRelease of unknown handle {}", id));
    check(cu().mem_release(it->second.first), "cuMemRelease");
    physical_.erase(it);
  }

  void do_map_physical(DevPtr addr, PhysicalHandle id) override {
    const auto& [handle, bytes] = physical_.at(id);
    check(cu().mem_map(static_cast<CUdeviceptr>(addr), bytes, 0, handle, 0), "cuMemMap");
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check(cu().mem_set_access(static_cast<CUdeviceptr>(addr), bytes, &access, 1), "cuMemSetAccess");
  }

  void do_unmap_physical(DevPtr addr, Bytes bytes) override {
    check(cu().mem_unmap(static_cast<CUdeviceptr>(addr), bytes), "cuMemUnmap");
  }

  std::optional<DevPtr> do_malloc_managed(Bytes bytes) override {
    void* p = nullptr;
    cudaError_t err = cudaMallocManaged(&p, bytes, cudaMemAttachGlobal);
    if (is_oom(err)) {
      cudaGetLastError();
      return std::nullopt;
    }
    check(err, "cudaMallocManaged");
    return reinterpret_cast<DevPtr>(p);
  }

  void do_free_managed(DevPtr ptr) override {
    check(cudaFree(reinterpret_cast<void*>(ptr)), "cudaFree (managed)");
  }

  void prefetch_managed(DevPtr ptr, Bytes bytes, StreamId stream) override {
    cudaMemLocation loc{};
    loc.type = cudaMemLocationTypeDevice;
    loc.id = 0;
    check(cudaMemPrefetchAsync(reinterpret_cast<void*>(ptr), bytes, loc, 0,
                               static_cast<cudaStream_t>(native_stream(stream))),
          "cudaMemPrefetchAsync");
  }

  void advise_managed(DevPtr ptr, Bytes bytes, bool preferred, bool accessed_by) override {
    cudaMemLocation loc{};
    loc.type = cudaMemLocationTypeDevice;
    loc.id = 0;
    if (preferred)
      check(cudaMemAdvise(reinterpret_cast<void*>(ptr), bytes, cudaMemAdviseSetPreferredLocation, loc),
            "cudaMemAdvise(PreferredLocation)");
    if (accessed_by)
      check(cudaMemAdvise(reinterpret_cast<void*>(ptr), bytes, cudaMemAdviseSetAccessedBy, loc),
            "cudaMemAdvise(AccessedBy)");
  }

  PoolHandle create_pool(const MemPoolOptions& o) override {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool{};
    check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
    std::uint64_t threshold = o.release_threshold;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
          "cudaMemPoolSetAttribute(ReleaseThreshold)");
    int v = o.reuse_follow_event_dependencies;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &v), "reuse attr");
    v = o.reuse_allow_opportunistic;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &v), "reuse attr");
    v = o.reuse_allow_internal_dependencies;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &v), "reuse attr");
    PoolHandle h = next_pool_++;
    pools_[h] = pool;
    return h;
  }

  void destroy_pool(PoolHandle h) override {
    auto it = pools_.find(h);
    if (it == pools_.end()) return;
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaMemPoolDestroy(it->second), "cudaMemPoolDestroy");
    pools_.erase(it);
  }

  std::optional<DevPtr> do_malloc_async(PoolHandle h, Bytes bytes, StreamId stream) override {
    void* p = nullptr;
    pool_call_delay_();
    const double wait = log_.on() ? log_.begin() : 0;
    cudaError_t err = cudaMallocFromPoolAsync(&p, bytes, pools_.at(h),
                                              static_cast<cudaStream_t>(native_stream(stream)));
    if (log_.on()) log_.end("malloc_async", bytes, err == cudaSuccess, wait, reinterpret_cast<DevPtr>(p), pools_.at(h));
    if (is_oom(err)) {
      cudaGetLastError();
      return std::nullopt;
    }
    check(err, "cudaMallocFromPoolAsync");
    return reinterpret_cast<DevPtr>(p);
  }

  void do_free_async(PoolHandle h, DevPtr ptr, StreamId stream) override {
    pool_call_delay_();
    const double wait = log_.on() ? log_.begin() : 0;
    cudaError_t err = cudaFreeAsync(reinterpret_cast<void*>(ptr), static_cast<cudaStream_t>(native_stream(stream)));
    if (log_.on()) {
      if (err == cudaSuccess) log_.note_free(static_cast<cudaStream_t>(native_stream(stream)));
      log_.end("free_async", 0, err == cudaSuccess, wait, ptr, pools_.at(h));
    }
    check(err, "cudaFreeAsync");
  }

  void trim_pool(PoolHandle h, Bytes keep) override {
    check(cudaMemPoolTrimTo(pools_.at(h), keep), "cudaMemPoolTrimTo");
  }

  MemPoolUsage pool_usage(PoolHandle h) const override {
    MemPoolUsage u;
    cudaMemPool_t pool = pools_.at(h);
    std::uint64_t v = 0;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &v); u.reserved_current = v;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &v); u.reserved_high = v;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v); u.used_current = v;
    cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &v); u.used_high = v;
    return u;
  }

  // With the call log on, a row after each compute op's launch (the runner reports each one):
  // when it was launched and how many logged frees the GPU had reached, so that a log shows how
  // far the host ran ahead of the GPU op by op, and where it stalled.
  void do_model_kernel(double, double) override {
    if (!log_.on()) return;
    const double wait = log_.begin(false);  // never a synchronize before a launch
    log_.end("launch", 0, true, wait, 0);
  }

  void do_synchronize() override {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  void* native_stream(StreamId stream) override {
    if (stream == 0) return nullptr;  // the legacy default stream, as PyTorch's stream 0
    auto it = streams_.find(stream);
    if (it != streams_.end()) return it->second;
    cudaStream_t s{};
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    streams_[stream] = s;
    return s;
  }

  Bytes used_bytes() const override {
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) return 0;
    return free >= baseline_free_ ? 0 : baseline_free_ - free;
  }

 private:
  DeviceInfo info_;
  Bytes granularity_ = 2 * MiB;
  void* ballast_ = nullptr;
  CallLog log_;
  PoolCallDelay pool_call_delay_;
  Bytes baseline_free_ = 0;
  std::map<DevPtr, std::pair<CUmemGenericAllocationHandle, Bytes>> handles_;
  std::map<PhysicalHandle, std::pair<CUmemGenericAllocationHandle, Bytes>> physical_;  // create_physical's
  PhysicalHandle physical_seq_ = 0;
  std::map<StreamId, void*> streams_;
  std::map<PoolHandle, cudaMemPool_t> pools_;
  PoolHandle next_pool_ = 0;
};

}  // namespace

bool cuda_path_built_in() { return true; }

bool cuda_device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

DeviceInfo cuda_device_info() {
  if (!cuda_device_available()) throw DeviceError("no CUDA GPU is visible");
  return query_device();
}

std::unique_ptr<Device> make_cuda_device(Bytes capacity_bytes) {
  if (!cuda_device_available()) throw DeviceError("no CUDA GPU is visible");
  return std::make_unique<CudaDevice>(capacity_bytes);
}

}  // namespace gmb
