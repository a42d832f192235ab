// GPU tests of the transformer workload (run on the H200; skip without a GPU): the cuBLAS
// calls and the touch kernel do what they claim, a training run on the GPU makes the same
// allocations as on sim, and the harness's share of the time is printed.
#include <gtest/gtest.h>

#include "gpu_test_helpers.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "harness/run/runner.h"
#include "workloads/transformer.h"
#include "workloads/transformer_compute.h"

using namespace gmb;

namespace {

float bf16_to_float(std::uint16_t h) {
  std::uint32_t u = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TransformerParams gpu_model() {
  TransformerParams p;
  p.style = Style::Korthikanti;
  p.layers = 2;
  p.hidden = 512;
  p.heads = 8;
  p.vocab = 8000;
  p.batch = 4;
  p.steps = 6;
  p.seq_len.dist = SeqDist::Uniform;
  p.seq_len.min = 64;
  p.seq_len.max = 512;
  p.seq_len.seed = 1;
  return p;
}

CaseResult run(DeviceChoice device, const std::string& allocator, const TransformerParams& p,
               AllocatorOptions options = {}) {
  CaseSpec spec{allocator, std::move(options), [p] { return make_transformer(p); }};
  return run_case(spec, DeviceSpec{device, 8 * GiB}, RunSettings{});
}

}  // namespace

TEST(GpuTransformer, GemmComputesARowMajorProductInBf16) {
  REQUIRE_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  // Row-major C[M x N] = A[M x K] B^T with B stored [N x K], as the workload's lm_head does:
  // cuBLAS column-major C^T = B A^T, i.e. m = N, n = M, op(first) = T.
  const int M = 3, N = 5, K = 64;
  std::vector<std::uint16_t> a(M * K), b(N * K);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k) a[i * K + k] = i == 0 ? 0x3F80 : (i == 1 ? 0x4000 : 0x0000);  // 1, 2, 0
  for (int j = 0; j < N; ++j)
    for (int k = 0; k < K; ++k) b[j * K + k] = k % 2 ? 0x3F80 : 0x0000;  // half the entries 1
  void *da, *db, *dc;
  ASSERT_EQ(cudaMalloc(&da, a.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&db, b.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dc, M * N * 2), cudaSuccess);
  cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
  void* state = tfgpu::create(nullptr);
  tfgpu::GemmCall g;
  g.m = N, g.n = M, g.k = K;
  g.trans_a = true, g.a = db, g.lda = K;   // B stored [N x K]
  g.trans_b = false, g.b = da, g.ldb = K;  // A stored [M x K]
  g.c = dc, g.ldc = N;
  tfgpu::gemm(state, tfgpu::Elem::BF16, g);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::uint16_t> c(M * N);
  cudaMemcpy(c.data(), dc, c.size() * 2, cudaMemcpyDeviceToHost);
  for (int j = 0; j < N; ++j) {
    EXPECT_EQ(bf16_to_float(c[0 * N + j]), 32.0f);  // 32 ones
    EXPECT_EQ(bf16_to_float(c[1 * N + j]), 64.0f);
    EXPECT_EQ(bf16_to_float(c[2 * N + j]), 0.0f);
  }
  tfgpu::destroy(state);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

TEST(GpuTransformer, TouchWritesWholeBuffersWithFiniteValues) {
  REQUIRE_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const std::size_t n = (1 << 20) + 48;  // a tail past the last 16-byte word stays as it was
  void *in, *out;
  ASSERT_EQ(cudaMalloc(&in, n), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, n), cudaSuccess);
  cudaMemset(out, 0xFF, n);  // 0xFFFF is a NaN in bf16 and fp16
  void* state = tfgpu::create(nullptr);
  tfgpu::TouchBuffer bufs[2] = {{in, n, false}, {out, n, true}};
  tfgpu::touch(state, bufs, 2);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::uint16_t> h(n / 2);
  cudaMemcpy(h.data(), out, n, cudaMemcpyDeviceToHost);
  std::size_t not_finite = 0;
  for (std::size_t i = 0; i < n / 2; ++i) not_finite += (h[i] & 0x7F80) == 0x7F80 || (h[i] & 0x7C00) == 0x7C00;
  EXPECT_EQ(not_finite, 0u) << "every 16-bit half written is a finite bf16 and fp16 value";
  tfgpu::destroy(state);
  cudaFree(in);
  cudaFree(out);
}

TEST(GpuTransformer, CublasSetupMemoryIsSmallNextToTheCapacity) {
  REQUIRE_GPU();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaFree(nullptr);
  std::size_t free0 = 0, free1 = 0, total = 0;
  cudaMemGetInfo(&free0, &total);
  // The first GEMMs of each dtype load cuBLAS kernels (lazily): memory that comes out of the
  // capacity a ballast leaves, outside the allocator under test.
  void* state = tfgpu::create(nullptr);
  void* buf;
  ASSERT_EQ(cudaMalloc(&buf, 64 << 20), cudaSuccess);
  for (auto e : {tfgpu::Elem::BF16, tfgpu::Elem::FP16, tfgpu::Elem::FP32}) {
    tfgpu::GemmCall g;
    g.m = g.n = g.k = 1024, g.lda = g.ldb = g.ldc = 1024;
    g.a = g.b = g.c = buf;
    tfgpu::gemm(state, e, g);
    g.batch = 8, g.m = g.n = g.k = 256, g.lda = g.ldb = g.ldc = 256, g.stride_a = g.stride_b = g.stride_c = 65536;
    tfgpu::gemm(state, e, g);
  }
  tfgpu::TouchBuffer b{buf, 1 << 20, true};
  tfgpu::touch(state, &b, 1);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemGetInfo(&free1, &total);
  double mib = (double(free0) - double(free1)) / double(1 << 20) - 64;
  std::printf("[gpu] cuBLAS handle + first GEMMs (bf16, fp16, fp32; plain and batched) + touch kernel: %.1f MiB "
              "of device memory outside any allocator\n", mib);
  EXPECT_LT(mib, 1024.0);
  tfgpu::destroy(state);
  cudaFree(buf);
}

TEST(GpuTransformer, TrainingOnTheGpuAllocatesWhatTheSimSays) {
  REQUIRE_GPU();
  for (const char* allocator : {"caching", "cuda_malloc"})
  for (Style style : {Style::Korthikanti, Style::PytorchEager}) {
    TransformerParams p = gpu_model();
    p.style = style;
    CaseResult gpu = run(DeviceChoice::Cuda, allocator, p);
    CaseResult sim = run(DeviceChoice::Sim, allocator, p);
    ASSERT_EQ(gpu.runs.size(), 1u) << gpu.error;
    const RunMetrics& g = gpu.runs[0];
    const RunMetrics& s = sim.runs[0];
    std::printf("[gpu] transformer %s: %llu steps, %.2f steps/s, %.0f tokens/s real, %.0f padded; allocator calls "
                "%.2f%%, compute calls %.2f%%, final sync %.2f%%, harness %.3f%% of %.3f s; peak allocated %llu, "
                "reserved %llu (sim %llu)\n",
                allocator, (unsigned long long)g.steps_completed, g.steps_per_s, g.tokens_per_s, g.padded_tokens_per_s,
                100 * g.alloc_seconds / g.seconds, 100 * g.compute_call_seconds / g.seconds,
                100 * g.sync_seconds / g.seconds, 100 * g.harness_seconds / g.seconds, g.seconds,
                (unsigned long long)g.peak_allocated_bytes, (unsigned long long)g.peak_reserved_bytes,
                (unsigned long long)s.peak_reserved_bytes);
    EXPECT_EQ(g.steps_completed, p.steps);
    EXPECT_FALSE(g.first_oom);
    EXPECT_EQ(g.peak_allocated_bytes, s.peak_allocated_bytes) << "the same ops on both devices";
    EXPECT_EQ(g.allocs, s.allocs);
    if (std::string(allocator) == "caching") {
      EXPECT_EQ(g.peak_reserved_bytes, s.peak_reserved_bytes);
    }
    EXPECT_GT(g.compute_call_seconds, 0.0);
    EXPECT_FALSE(gpu.throughput_modeled);
  }
}

TEST(GpuTransformer, EveryModeAndDtypeRunsOnTheGpu) {
  REQUIRE_GPU();
  std::vector<TransformerParams> variants;
  for (DType t : {DType::BF16, DType::FP16, DType::FP32})
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      TransformerParams p = gpu_model();
      p.dtype = t;
      p.recompute = r;
      p.steps = 2;
      variants.push_back(p);
    }
  for (Optimizer o : {Optimizer::Fused, Optimizer::SingleTensor}) {
    TransformerParams p = gpu_model();
    p.optimizer = o;
    p.steps = 2;
    variants.push_back(p);
  }
  TransformerParams inf = gpu_model();
  inf.mode = TransformerMode::Inference;
  inf.generate = 8;
  inf.steps = 2;
  variants.push_back(inf);
  inf.kv_block = 4;
  variants.push_back(inf);
  // pytorch_eager on the GPU: every tensor written once when made (memory-touch compute).
  for (Family f : {Family::Gpt, Family::Llama, Family::Bert})
    for (Precision pr : {Precision::AutocastBf16, Precision::Bf16, Precision::Fp32}) {
      TransformerParams p = gpu_model();
      p.style = Style::PytorchEager;
      p.family = f;
      p.precision = pr;
      p.attention = f == Family::Bert ? Attention::Explicit : Attention::SdpaFlash;
      p.kv_heads = f == Family::Llama ? 2 : 0;
      p.dropout = f == Family::Bert ? 0.1 : 0;
      p.steps = 2;
      variants.push_back(p);
    }
  for (const auto& p : variants) {
    CaseResult r = run(DeviceChoice::Cuda, "caching", p);
    ASSERT_EQ(r.runs.size(), 1u) << r.error;
    EXPECT_EQ(r.runs[0].steps_completed, 2u) << r.workload_label;
    std::printf("[gpu] %s: %.2f steps/s\n", r.workload_label.c_str(), r.runs[0].steps_per_s);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}
