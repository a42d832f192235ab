// vmm_probe: the cost of each of the driver's virtual memory calls, one at a time, on the GPU.
//
// Build:  nvcc -O2 -std=c++17 -o vmm_probe scripts/probe/vmm_probe.cu -lcuda
// Run:    ./vmm_probe > vmm_probe.json
//
// For chunk sizes of 2 MiB (the granularity: what vmm_stitch maps) and 20 MiB, REPS rounds of:
// cuMemAddressReserve, cuMemCreate, cuMemMap + cuMemSetAccess (as Device::map_physical), a second
// cuMemMap + cuMemSetAccess of the same handle at another address (what a stitch does),
// cuMemUnmap of each, cuMemRelease, cuMemAddressFree. Prints the median, minimum and maximum
// host time of each call in microseconds as one JSON object. Every call is checked.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* msg = nullptr;
    cuGetErrorString(r, &msg);
    std::fprintf(stderr, "%s failed: %s (%d)\n", what, msg ? msg : "?", static_cast<int>(r));
    std::exit(1);
  }
}

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Summary {
  double median, min, max;
};
Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return {median, v.front(), v.back()};
}

}  // namespace

int main() {
  constexpr int kReps = 50;
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    std::fprintf(stderr, "no usable GPU\n");
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  int driver = 0;
  cudaDriverGetVersion(&driver);
  CUmemAllocationProp ap{};
  ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.location.id = 0;
  size_t granularity = 0;
  check(cuMemGetAllocationGranularity(&granularity, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity");
  CUmemAccessDesc access{};
  access.location = ap.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

  std::printf("{\"tool\":\"scripts/probe/vmm_probe.cu\",\"device\":\"%s\",\"cuda_driver_api_version\":%d,"
              "\"granularity\":%zu,\"reps\":%d,\"sizes\":[",
              prop.name, driver, granularity, kReps);
  const std::vector<size_t> sizes = {granularity, 10 * granularity};
  for (std::size_t si = 0; si < sizes.size(); ++si) {
    const size_t bytes = sizes[si];
    std::map<std::string, std::vector<double>> t;
    for (int rep = 0; rep < kReps; ++rep) {
      CUdeviceptr va = 0, va2 = 0;
      CUmemGenericAllocationHandle h{};
      auto t0 = Clock::now();
      check(cuMemAddressReserve(&va, bytes, 0, 0, 0), "cuMemAddressReserve");
      t["cuMemAddressReserve"].push_back(us_since(t0));
      check(cuMemAddressReserve(&va2, bytes, 0, 0, 0), "cuMemAddressReserve");
      t0 = Clock::now();
      check(cuMemCreate(&h, bytes, &ap, 0), "cuMemCreate");
      t["cuMemCreate"].push_back(us_since(t0));
      t0 = Clock::now();
      check(cuMemMap(va, bytes, 0, h, 0), "cuMemMap");
      check(cuMemSetAccess(va, bytes, &access, 1), "cuMemSetAccess");
      t["cuMemMap+cuMemSetAccess"].push_back(us_since(t0));
      t0 = Clock::now();
      check(cuMemMap(va2, bytes, 0, h, 0), "cuMemMap (second address)");
      check(cuMemSetAccess(va2, bytes, &access, 1), "cuMemSetAccess (second address)");
      t["cuMemMap+cuMemSetAccess, second address"].push_back(us_since(t0));
      cudaMemset(reinterpret_cast<void*>(va2), 0, bytes);  // the mapping is usable
      cudaDeviceSynchronize();
      t0 = Clock::now();
      check(cuMemUnmap(va2, bytes), "cuMemUnmap (second address)");
      t["cuMemUnmap, second address"].push_back(us_since(t0));
      t0 = Clock::now();
      check(cuMemUnmap(va, bytes), "cuMemUnmap");
      t["cuMemUnmap"].push_back(us_since(t0));
      t0 = Clock::now();
      check(cuMemRelease(h), "cuMemRelease");
      t["cuMemRelease"].push_back(us_since(t0));
      t0 = Clock::now();
      check(cuMemAddressFree(va, bytes), "cuMemAddressFree");
      t["cuMemAddressFree"].push_back(us_since(t0));
      check(cuMemAddressFree(va2, bytes), "cuMemAddressFree");
    }
    std::printf("%s{\"bytes\":%zu,\"calls_us\":{", si ? "," : "", bytes);
    bool first = true;
    for (const auto& [name, v] : t) {
      const Summary s = summarize(v);
      std::printf("%s\"%s\":{\"median\":%.3f,\"min\":%.3f,\"max\":%.3f}", first ? "" : ",", name.c_str(), s.median,
                  s.min, s.max);
      first = false;
    }
    std::printf("}}");
  }
  std::printf("]}\n");
  return 0;
}
