// The GPU side of the transformer workload (transformer_compute.cu): cuBLAS GEMMs in the
// workload's dtype and one kernel that reads and writes a set of buffers. Everything is
// launched on the stream given at creation; nothing here allocates device memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gmb::tfgpu {

enum class Elem : int { BF16 = 0, FP16 = 1, FP32 = 2 };

struct GemmCall {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool accumulate = false;
};

constexpr int kMaxTouchBuffers = 48;  // one launch; the kernel arguments stay under 1 KiB
struct TouchBuffer {
  void* ptr = nullptr;
  std::uint64_t bytes = 0;
  bool write = false;
};

// Creates a cuBLAS handle bound to `stream` (a cudaStream_t). Throws DeviceOutOfMemory when the
// driver has no memory for it (CUBLAS_STATUS_ALLOC_FAILED), std::runtime_error on other failures.
void* create(void* stream);
void destroy(void* state);
// Sets the cuBLAS workspace (nullptr, 0: none). Cheap when unchanged.
void set_workspace(void* state, void* ptr, std::size_t bytes);
void gemm(void* state, Elem elem, const GemmCall& call);
// Reads the buffers with write = false and writes those with write = true, once each.
void touch(void* state, const TouchBuffer* buffers, int count);

}  // namespace gmb::tfgpu
