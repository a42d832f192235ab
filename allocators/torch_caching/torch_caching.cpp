#include "allocators/torch_caching/torch_caching.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/Exception.h>
#if __has_include(<c10/core/AllocatorConfig.h>)
#include <c10/core/AllocatorConfig.h>
#endif
#include <cuda_runtime_api.h>
// No fmt here: libtorch's include folder carries its own fmt, which would shadow the system's.

#include "allocators/caching/alloc_conf.h"
#include "common/units.h"

namespace gmb {
namespace {

namespace torch_alloc = c10::cuda::CUDACachingAllocator;

struct TorchOptions {
  std::string alloc_conf;
  std::optional<Bytes> memory_limit;
};

TorchOptions parse_torch_options(const AllocatorOptions& options) {
  check_option_keys(options, torch_caching_options());
  TorchOptions o;
  if (auto it = options.find("alloc_conf"); it != options.end()) {
    caching::parse_alloc_conf(it->second);  // the same grammar and errors as `caching`, before PyTorch sees it
    o.alloc_conf = it->second;
  }
  if (auto it = options.find("memory_limit_bytes"); it != options.end()) {
    o.memory_limit = parse_size(it->second);
    if (!o.memory_limit)
      throw OptionError("memory_limit_bytes", "memory_limit_bytes: '" + it->second + "' is not a size",
                        "a byte count or a size such as 24GiB");
  }
  return o;
}

// PyTorch's settings parser: where torch keeps it differs between releases.
void apply_alloc_conf(const std::string& conf) {
#if __has_include(<c10/core/AllocatorConfig.h>)
  c10::CachingAllocator::setAllocatorSettings(conf);
#else
  torch_alloc::setAllocatorSettings(conf);
#endif
}

// The settings of a case, on PyTorch's defaults: PyTorch's parser resets the keys it does not
// find except expandable_segments, so that one is spelled out (a case never inherits the last's).
std::string case_settings(const std::string& conf) {
  if (conf.find("expandable_segments") != std::string::npos) return conf;
  return conf.empty() ? "expandable_segments:False" : conf + ",expandable_segments:False";
}

// Device calls: num_device_alloc/num_device_free where this PyTorch counts them, else the
// segments made and released (the same count without expandable segments).
template <class Stats>
auto device_allocs_of(const Stats& d, int) -> decltype(d.num_device_alloc, std::int64_t()) {
  return d.num_device_alloc;
}
template <class Stats>
std::int64_t device_allocs_of(const Stats& d, long) {
  return d.segment[0].allocated;
}
template <class Stats>
auto device_frees_of(const Stats& d, int) -> decltype(d.num_device_free, std::int64_t()) {
  return d.num_device_free;
}
template <class Stats>
std::int64_t device_frees_of(const Stats& d, long) {
  return d.segment[0].freed;
}

bool g_in_use = false;  // one torch_caching allocator at a time (PyTorch's is one per process)

class TorchCachingAllocator final : public InspectableAllocator {
 public:
  TorchCachingAllocator(Device& device, const TorchOptions& o) : device_(device) {
    if (g_in_use) throw std::runtime_error("torch_caching: PyTorch's allocator is one per process, already in use");
    int dev = 0;
    cudaGetDevice(&dev);
    device_index_ = dev;
    int count = 1;
    cudaGetDeviceCount(&count);
    if (!torch_alloc::get()->initialized()) torch_alloc::init(count);
    torch_alloc::emptyCache();
    apply_alloc_conf(case_settings(o.alloc_conf));
    double fraction = 1.0;
    if (o.memory_limit) {
      const Bytes total = device.info().total_bytes;
      fraction = total ? static_cast<double>(*o.memory_limit) / static_cast<double>(total) : 1.0;
      if (fraction > 1.0) fraction = 1.0;
    }
    torch_alloc::setMemoryFraction(fraction, device_index_);
    torch_alloc::resetPeakStats(device_index_);
    torch_alloc::resetAccumulatedStats(device_index_);
    g_in_use = true;
  }

  ~TorchCachingAllocator() override {
    for (auto& [ptr, bytes] : live_) torch_alloc::raw_delete(reinterpret_cast<void*>(ptr));
    torch_alloc::emptyCache();
    torch_alloc::setMemoryFraction(1.0, device_index_);
    g_in_use = false;
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    try {
      void* p = torch_alloc::raw_alloc_with_stream(bytes, static_cast<cudaStream_t>(device_.native_stream(stream)));
      const DevPtr ptr = reinterpret_cast<DevPtr>(p);
      if (ptr) live_[ptr] = bytes;
      return ptr ? ptr : DevPtr{1};  // PyTorch gives nullptr for 0 bytes; a 0-byte request succeeds
    } catch (const c10::OutOfMemoryError& e) {
      oom_ = OomDetails{};
      const AllocatorStats s = stats();
      oom_.requested_bytes = bytes;
      oom_.allocated_bytes = s.allocated_bytes;
      oom_.reserved_bytes = s.reserved_bytes;
      oom_.cached_bytes = s.reserved_bytes - s.allocated_bytes;
      oom_.retried_after_freeing_cache = true;
      oom_.message = e.what_without_backtrace();
      return std::nullopt;
    }
  }

  void deallocate(DevPtr ptr) override {
    auto it = live_.find(ptr);
    if (it == live_.end()) return;  // includes the stand-in pointer of a 0-byte request
    live_.erase(it);
    torch_alloc::raw_delete(reinterpret_cast<void*>(ptr));
  }

  void empty_cache() override { torch_alloc::emptyCache(); }

  AllocatorStats stats() const override {
    const auto d = torch_alloc::getDeviceStats(device_index_);
    constexpr std::size_t all = 0;  // StatType::AGGREGATE
    AllocatorStats s;
    s.allocated_bytes = static_cast<Bytes>(d.allocated_bytes[all].current);
    s.reserved_bytes = static_cast<Bytes>(d.reserved_bytes[all].current);
    s.requested_bytes = static_cast<Bytes>(d.requested_bytes[all].current);
    s.peak_allocated_bytes = static_cast<Bytes>(d.allocated_bytes[all].peak);
    s.peak_reserved_bytes = static_cast<Bytes>(d.reserved_bytes[all].peak);
    s.segments = static_cast<std::uint64_t>(d.segment[all].current);
    s.allocs = static_cast<std::uint64_t>(d.allocation[all].allocated);
    s.frees = static_cast<std::uint64_t>(d.allocation[all].freed);
    s.device_allocs = static_cast<std::uint64_t>(device_allocs_of(d, 0));
    s.device_frees = static_cast<std::uint64_t>(device_frees_of(d, 0));
    s.cache_hits = s.allocs > s.device_allocs ? s.allocs - s.device_allocs : 0;
    s.ooms = static_cast<std::uint64_t>(d.num_ooms);
    s.alloc_retries = static_cast<std::uint64_t>(d.num_alloc_retries);
    return s;
  }

  OomDetails last_oom() const override { return oom_; }

  std::vector<std::pair<std::string, std::int64_t>> memory_stats() const override {
    const auto d = torch_alloc::getDeviceStats(device_index_);
    return {{"allocated_bytes.all.current", d.allocated_bytes[0].current},
            {"allocated_bytes.all.peak", d.allocated_bytes[0].peak},
            {"reserved_bytes.all.current", d.reserved_bytes[0].current},
            {"reserved_bytes.all.peak", d.reserved_bytes[0].peak},
            {"requested_bytes.all.current", d.requested_bytes[0].current},
            {"num_alloc_retries", d.num_alloc_retries},
            {"num_ooms", d.num_ooms},
            {"num_device_alloc", device_allocs_of(d, 0)},
            {"num_device_free", device_frees_of(d, 0)}};
  }

 private:
  Device& device_;
  int device_index_ = 0;
  std::unordered_map<DevPtr, Bytes> live_;
  OomDetails oom_;
};

}  // namespace

std::vector<AllocatorOption> torch_caching_options() {
  return {{"alloc_conf", "PyTorch's allocator settings, e.g. expandable_segments:True (keys: " +
                             caching::alloc_conf_keys_text() + ")"},
          {"memory_limit_bytes", "a byte count or a size such as 24GiB"}};
}

void validate_torch_caching_options(const AllocatorOptions& options) { parse_torch_options(options); }

std::unique_ptr<InspectableAllocator> make_torch_caching_allocator(Device& device, const AllocatorOptions& options) {
  TorchOptions o = parse_torch_options(options);
  if (device.info().kind != DeviceKind::Cuda)
    throw std::runtime_error(
        "torch_caching runs PyTorch's own allocator, which only the GPU can run (--device cuda); on the simulated "
        "device use caching, which makes the same decisions");
  return std::make_unique<TorchCachingAllocator>(device, o);
}

}  // namespace gmb
