// Shared by the standalone CUDA probes (pool_probe.cu, cap_probe.cu): checked CUDA calls, output
// files, and a cudaMemPool made as gpumembench's cuda_mempool allocator makes it (pinned device
// memory, release threshold max, every reuse flag on). Header-only: each probe is one nvcc call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

static constexpr size_t MiB = 1024 * 1024;
static constexpr size_t GiB = 1024 * MiB;

// A failed CUDA call prints what failed and where, then throws: the probe exits 1 after
// closing what it wrote.
static void ck(cudaError_t e, const char* what, int line) {
  if (e != cudaSuccess) {
    fprintf(stderr, "probe: %s failed: %s (line %d)\n", what, cudaGetErrorString(e), line);
    throw std::runtime_error(what);
  }
}
#define CK(x) ck((x), #x, __LINE__)

static size_t device_free() {
  size_t f = 0, t = 0;
  CK(cudaMemGetInfo(&f, &t));
  return f;
}

static uint64_t u64(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

static FILE* open_out(const std::string& dir, const std::string& name) {
  std::string path = dir + "/" + name;
  FILE* f = fopen(path.c_str(), "w");
  if (!f) {
    fprintf(stderr, "probe: cannot write %s\n", path.c_str());
    throw std::runtime_error("open");
  }
  return f;
}
static void close_out(FILE* f) {
  if (fclose(f) != 0) throw std::runtime_error("close");
}

struct Pool {
  cudaMemPool_t pool{};
  Pool() {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CK(cudaMemPoolCreate(&pool, &props));
    uint64_t threshold = UINT64_MAX;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    int v = 1;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &v));
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &v));
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &v));
  }
  ~Pool() {
    cudaDeviceSynchronize();
    cudaMemPoolDestroy(pool);
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  uint64_t attr(cudaMemPoolAttr a) const {
    uint64_t v = 0;
    CK(cudaMemPoolGetAttribute(pool, a, &v));
    return v;
  }
  uint64_t reserved() const { return attr(cudaMemPoolAttrReservedMemCurrent); }
  uint64_t used() const { return attr(cudaMemPoolAttrUsedMemCurrent); }
  void* alloc(size_t n) {
    void* p = nullptr;
    CK(cudaMallocFromPoolAsync(&p, n, pool, nullptr));
    return p;
  }
  // nullptr when the pool cannot serve it (the error is cleared: an OOM is not sticky).
  void* try_alloc(size_t n) {
    void* p = nullptr;
    cudaError_t e = cudaMallocFromPoolAsync(&p, n, pool, nullptr);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;
    }
    CK(e);
    return p;
  }
  void free(void* p) { CK(cudaFreeAsync(p, nullptr)); }
  void trim(size_t keep) {
    CK(cudaDeviceSynchronize());
    CK(cudaMemPoolTrimTo(pool, keep));
  }
};
