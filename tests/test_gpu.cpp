// GPU tests: run on the H200 through the device tool; skip themselves where no GPU is visible.
#include <gtest/gtest.h>

#include "gpu_test_helpers.h"

#include "allocators/registry.h"
#include "harness/run/runner.h"
#include "workloads/hole_pattern.h"

using namespace gmb;

namespace {
using gmb::testing::gpu_hole_case;
}  // namespace

TEST(Gpu, BallastLeavesTheConfiguredCapacity) {
  REQUIRE_GPU();
  auto d = make_cuda_device(2 * GiB);
  const auto& info = d->info();
  std::printf("[gpu] %s: total %llu, ballast %llu, capacity left %llu bytes\n", info.name.c_str(),
              (unsigned long long)info.total_bytes, (unsigned long long)info.ballast_bytes,
              (unsigned long long)info.capacity_bytes);
  EXPECT_NEAR(double(info.capacity_bytes), double(2 * GiB), double(64 * MiB));
  EXPECT_FALSE(d->malloc(3 * GiB)) << "a request past the capacity must be a real driver OOM";
  auto p = d->malloc(1 * GiB);
  ASSERT_TRUE(p);
  EXPECT_NEAR(double(d->used_bytes()), double(1 * GiB), double(4 * MiB));
  d->free(*p);
}

TEST(Gpu, HolePatternUnderCudaMallocReservesWhatTheSimSays) {
  REQUIRE_GPU();
  auto gpu = gpu_hole_case(DeviceChoice::Cuda, "cuda_malloc");
  auto sim = gpu_hole_case(DeviceChoice::Sim, "cuda_malloc");
  ASSERT_EQ(gpu.runs.size(), 1u) << gpu.error;
  std::printf("[gpu] hole pattern, cuda_malloc: peak reserved gpu %llu (cudaMemGetInfo), sim %llu bytes\n",
              (unsigned long long)gpu.runs[0].peak_reserved_bytes,
              (unsigned long long)sim.runs[0].peak_reserved_bytes);
  EXPECT_EQ(gpu.runs[0].peak_reserved_bytes, sim.runs[0].peak_reserved_bytes);
  EXPECT_EQ(gpu.runs[0].peak_allocated_bytes, 650 * MiB);
  EXPECT_EQ(gpu.runs[0].device_allocs, 4u);
}

TEST(Gpu, PolicyAllocatorsDecideTheSameOnGpuAndSim) {
  REQUIRE_GPU();
  for (const char* conf : {"", "expandable_segments:True"}) {
    AllocatorOptions o;
    if (*conf) o["alloc_conf"] = conf;
    auto gpu = gpu_hole_case(DeviceChoice::Cuda, "caching", o);
    auto sim = gpu_hole_case(DeviceChoice::Sim, "caching", o);
    ASSERT_EQ(gpu.runs.size(), 1u) << gpu.error;
    std::printf("[gpu] hole pattern, caching[%s]: peak reserved gpu %llu, sim %llu bytes\n", conf,
                (unsigned long long)gpu.runs[0].peak_reserved_bytes,
                (unsigned long long)sim.runs[0].peak_reserved_bytes);
    EXPECT_EQ(gpu.runs[0].peak_reserved_bytes, sim.runs[0].peak_reserved_bytes);
    EXPECT_EQ(gpu.runs[0].device_allocs, sim.runs[0].device_allocs);
  }
}

TEST(Gpu, VmmMapAndUnmapTakeAndReturnPhysicalMemory) {
  REQUIRE_GPU();
  auto d = make_cuda_device(0);
  Bytes g = d->vmm_granularity();
  EXPECT_EQ(g, 2 * MiB);
  auto va = d->reserve_address_range(64 * g);
  ASSERT_TRUE(va);
  Bytes before = d->used_bytes();
  ASSERT_TRUE(d->map(*va, 10 * g));
  EXPECT_EQ(d->used_bytes() - before, 10 * g);
  d->unmap(*va, 10 * g);
  EXPECT_EQ(d->used_bytes(), before);
  d->release_address_range(*va, 64 * g);
}

TEST(Gpu, NativeAllocatorsRunTheHolePattern) {
  REQUIRE_GPU();
  for (const char* name : {"cuda_managed", "cuda_mempool"}) {
    auto gpu = gpu_hole_case(DeviceChoice::Cuda, name);
    ASSERT_EQ(gpu.runs.size(), 1u) << gpu.error;
    std::printf("[gpu] hole pattern, %s: peak reserved %llu, allocated %llu bytes\n", name,
                (unsigned long long)gpu.runs[0].peak_reserved_bytes,
                (unsigned long long)gpu.runs[0].peak_allocated_bytes);
    EXPECT_EQ(gpu.runs[0].peak_allocated_bytes, 650 * MiB);
    EXPECT_FALSE(gpu.runs[0].first_oom);
  }
}
