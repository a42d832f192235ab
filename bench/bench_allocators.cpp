// Allocate+free latency per size for the four allocators, through the Allocator interface
// (make_allocator), on the real GPU when one is visible, else on the simulated device.
//
//   BM_AllocFree/<device>/<allocator>/<bytes>   one request size, allocated and freed again
//                                               and again (one warm-up pair first, so caches
//                                               and pools are warm; cuda_malloc has neither)
//
// <device> is "cuda" or "sim". On sim the wall time is the model's own bookkeeping, not a GPU
// figure; the counter modeled_us is the modeled driver time per pair (H200 medians, see
// devices/sim_device.cpp). device_calls is the driver calls per pair on either device.
// The same sizes for every allocator: 512 B .. 1 GiB.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "allocators/registry.h"

namespace gmb {
namespace {

constexpr Bytes kSizes[] = {512, 4 * KiB, 64 * KiB, 1 * MiB, 2 * MiB, 16 * MiB, 128 * MiB, 1 * GiB};
constexpr const char* kAllocators[] = {"cuda_malloc", "cuda_managed", "cuda_mempool", "caching"};

bool use_cuda() {
  static const bool cuda = cuda_device_available();
  return cuda;
}

// One device for the whole run: the whole card on cuda, an H200-sized sim otherwise.
Device& device() {
  static std::unique_ptr<Device> dev = [] {
    if (use_cuda()) return make_cuda_device(0);
    SimDeviceOptions o;
    o.capacity_bytes = 139 * GiB;
    return make_sim_device(o);
  }();
  return *dev;
}

std::uint64_t driver_calls(const DeviceCounters& c) {
  return c.mallocs + c.frees + c.vmm_maps + c.vmm_unmaps + c.managed_mallocs + c.managed_frees +
         c.async_mallocs + c.async_frees + c.handle_creates + c.handle_releases + c.handle_maps +
         c.handle_unmaps;
}

void alloc_free(benchmark::State& state, const std::string& allocator, Bytes bytes) {
  Device& dev = device();
  std::unique_ptr<InspectableAllocator> a;
  try {
    a = make_allocator(allocator, dev, {});
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  auto warm = a->allocate(bytes, 0);
  if (!warm) {
    state.SkipWithError("out of memory on the warm-up allocation");
    return;
  }
  a->deallocate(*warm);
  const DeviceCounters before = dev.counters();
  for (auto _ : state) {
    auto p = a->allocate(bytes, 0);
    if (!p) {
      state.SkipWithError("out of memory");
      break;
    }
    benchmark::DoNotOptimize(*p);
    a->deallocate(*p);
  }
  dev.synchronize();  // stream-ordered frees (cuda_mempool) complete inside the measurement
  const DeviceCounters& after = dev.counters();
  state.counters["device_calls"] =
      benchmark::Counter(static_cast<double>(driver_calls(after) - driver_calls(before)),
                         benchmark::Counter::kAvgIterations);
  if (dev.simulated())
    state.counters["modeled_us"] =
        benchmark::Counter((after.modeled_call_seconds - before.modeled_call_seconds) * 1e6,
                           benchmark::Counter::kAvgIterations);
  state.SetLabel(dev.info().name);
}

// Registered before main (benchmark_main): names carry the device kind.
struct Registrar {
  Registrar() {
    const char* kind = use_cuda() ? "cuda" : "sim";
    for (const char* allocator : kAllocators)
      for (Bytes bytes : kSizes) {
        std::string name = fmt::format("BM_AllocFree/{}/{}/{}", kind, allocator, bytes);
        benchmark::RegisterBenchmark(name.c_str(), [allocator, bytes](benchmark::State& s) {
          alloc_free(s, allocator, bytes);
        })->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
  }
} registrar;

}  // namespace
}  // namespace gmb
