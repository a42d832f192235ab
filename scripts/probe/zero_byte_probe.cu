// zero_byte_probe: what each allocation call of the driver does with a request of 0 bytes, so
// the sim and the allocators built on these calls do the same (a trace may hold such requests:
// torch.empty(0) reaches the allocator in some versions, RMM logs record them).
//
// Build:  nvcc -O2 -std=c++17 -o zero_byte_probe scripts/probe/zero_byte_probe.cu
// Run:    ./zero_byte_probe     one line a call: call, status name, pointer, free bytes before/after
//
// Calls: cudaMalloc, cudaMallocManaged, cudaMallocAsync (default pool), cudaMallocFromPoolAsync
// (a new pool), each twice (do two 0-byte requests get one pointer?), then cudaFree /
// cudaFreeAsync of what came back.
#include <cuda_runtime.h>

#include <cstdio>

namespace {
size_t free_bytes() {
  size_t f = 0, t = 0;
  cudaMemGetInfo(&f, &t);
  return f;
}
void report(const char* call, cudaError_t err, void* p, size_t before) {
  std::printf("%s,%s,%p,%zu,%zu\n", call, cudaGetErrorName(err), p, before, free_bytes());
  cudaGetLastError();
}
}  // namespace

int main() {
  cudaFree(nullptr);
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaMemPool_t pool;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPoolCreate(&pool, &props);
  std::printf("call,status,pointer,free_before,free_after\n");
  void* p[8] = {};
  size_t b;
  cudaError_t e;
  b = free_bytes(); e = cudaMalloc(&p[0], 0); report("cudaMalloc(0)", e, p[0], b);
  b = free_bytes(); e = cudaMalloc(&p[1], 0); report("cudaMalloc(0) again", e, p[1], b);
  b = free_bytes(); e = cudaMallocManaged(&p[2], 0); report("cudaMallocManaged(0)", e, p[2], b);
  b = free_bytes(); e = cudaMallocManaged(&p[3], 0); report("cudaMallocManaged(0) again", e, p[3], b);
  b = free_bytes(); e = cudaMallocAsync(&p[4], 0, s); cudaStreamSynchronize(s); report("cudaMallocAsync(0)", e, p[4], b);
  b = free_bytes(); e = cudaMallocAsync(&p[5], 0, s); cudaStreamSynchronize(s); report("cudaMallocAsync(0) again", e, p[5], b);
  b = free_bytes(); e = cudaMallocFromPoolAsync(&p[6], 0, pool, s); cudaStreamSynchronize(s);
  report("cudaMallocFromPoolAsync(0)", e, p[6], b);
  b = free_bytes(); e = cudaMallocFromPoolAsync(&p[7], 0, pool, s); cudaStreamSynchronize(s);
  report("cudaMallocFromPoolAsync(0) again", e, p[7], b);
  const char* frees[] = {"cudaFree", "cudaFree", "cudaFree (managed)", "cudaFree (managed)",
                         "cudaFreeAsync", "cudaFreeAsync", "cudaFreeAsync (pool)", "cudaFreeAsync (pool)"};
  for (int i = 0; i < 8; ++i) {
    b = free_bytes();
    e = i < 4 ? cudaFree(p[i]) : cudaFreeAsync(p[i], s);
    cudaStreamSynchronize(s);
    report(frees[i], e, p[i], b);
  }
  b = free_bytes(); e = cudaFree(nullptr); report("cudaFree(nullptr)", e, nullptr, b);
  b = free_bytes(); e = cudaFreeAsync(nullptr, s); cudaStreamSynchronize(s); report("cudaFreeAsync(nullptr)", e, nullptr, b);
  return 0;
}
