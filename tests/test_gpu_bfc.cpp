// bfc on the H200: its decisions are its own code, so the hole pattern must reserve the same
// bytes with the same device calls on the GPU as on the simulated device, for growth, the
// pre-allocated limit and a fixed cap. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdio>

#include "gpu_test_helpers.h"

using namespace gmb;
using gmb::testing::gpu_hole_case;

TEST(GpuBfc, HolePatternReservesAndCallsTheDeviceAsOnSim) {
  REQUIRE_GPU();
  for (const AllocatorOptions& o : {AllocatorOptions{{"allow_growth", "true"}}, AllocatorOptions{},
                                    AllocatorOptions{{"memory_limit", "1GiB"}}}) {
    const CaseResult gpu = gpu_hole_case(DeviceChoice::Cuda, "bfc", o);
    ASSERT_TRUE(gpu.error.empty()) << gpu.error;
    // BFC's default limit comes from the memory the card has (TF: available memory less its
    // reserve). On the H200 the CUDA context and cuBLAS keep 896 KiB of the 8 GiB the ballast
    // leaves, so sim runs with the capacity the GPU case really had.
    CaseSpec spec{"bfc", o, [] { return make_hole_pattern(HolePatternParams{}); }};
    const CaseResult sim = run_case(spec, DeviceSpec{DeviceChoice::Sim, gpu.capacity_bytes}, RunSettings{});
    const RunMetrics& g = gpu.runs.front();
    const RunMetrics& s = sim.runs.front();
    std::printf("[gpu] hole pattern, %s: peak reserved gpu %llu, sim %llu bytes; device mallocs %llu / %llu\n",
                gpu.allocator_label.c_str(), (unsigned long long)g.peak_reserved_bytes,
                (unsigned long long)s.peak_reserved_bytes, (unsigned long long)g.device_allocs,
                (unsigned long long)s.device_allocs);
    EXPECT_EQ(g.peak_reserved_bytes, s.peak_reserved_bytes) << gpu.allocator_label;
    EXPECT_EQ(g.peak_allocated_bytes, s.peak_allocated_bytes) << gpu.allocator_label;
    EXPECT_EQ(g.device_allocs, s.device_allocs) << gpu.allocator_label;
    EXPECT_EQ(g.device_frees, s.device_frees) << gpu.allocator_label;
    EXPECT_EQ(g.ooms, s.ooms) << gpu.allocator_label;
  }
}

TEST(GpuBfc, IdealRunsOnSimInAGpuRun) {
  REQUIRE_GPU();
  const CaseResult c = gpu_hole_case(DeviceChoice::Cuda, "ideal");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.runs.front().peak_reserved_bytes, c.need->peak_requested_bytes);
  EXPECT_EQ(c.runs.front().device_allocs, 0u);
}
