// torch_caching (real PyTorch's allocator, where the build found libtorch) beside `caching` (ours)
// on the GPU, on the same workloads at the same capacity: the memory figures must be equal. This is
// the check that `caching` makes PyTorch's decisions, with PyTorch itself as the reference, on the
// shipped configs' workloads. Skips without a GPU or without torch_caching in the build.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "allocators/registry.h"
#include "gpu_test_helpers.h"
#include "harness/config/config.h"
#include "harness/run/runner.h"
#include "test_helpers.h"

using namespace gmb;

namespace {

#define REQUIRE_TORCH_CACHING()                                   \
  REQUIRE_GPU();                                                  \
  if (!find_allocator("torch_caching"))                           \
  GTEST_SKIP() << "torch_caching is not built in (no libtorch when CMake ran)"

struct Pair {
  CaseResult ours, torch;
};

// One workload of a shipped config, both allocators, `steps` steps, on the GPU at `capacity`.
Pair run_both(const std::string& config_name, std::size_t workload, const std::string& conf, Bytes capacity,
              std::uint64_t steps) {
  const Config config = load_config(gmb::testing::source_path("configs/" + config_name));
  const WorkloadSpec& w = config.workloads.at(workload);
  RunSettings settings;
  settings.max_steps = steps;
  settings.on_oom = OnOom::Continue;
  AllocatorOptions o;
  if (!conf.empty()) o["alloc_conf"] = conf;
  Pair p;
  p.ours = run_case(CaseSpec{"caching", o, w.make}, DeviceSpec{DeviceChoice::Cuda, capacity}, settings);
  p.torch = run_case(CaseSpec{"torch_caching", o, w.make}, DeviceSpec{DeviceChoice::Cuda, capacity}, settings);
  return p;
}

void expect_same_memory(const Pair& p, const std::string& what) {
  ASSERT_EQ(p.ours.runs.size(), 1u) << what << ": " << p.ours.error;
  ASSERT_EQ(p.torch.runs.size(), 1u) << what << ": " << p.torch.error;
  const RunMetrics& a = p.ours.runs[0];
  const RunMetrics& b = p.torch.runs[0];
  std::printf("[gpu] %s: peak reserved ours %llu torch %llu; peak allocated ours %llu torch %llu; device allocs "
              "ours %llu torch %llu; OOMs ours %llu torch %llu\n",
              what.c_str(), (unsigned long long)a.peak_reserved_bytes, (unsigned long long)b.peak_reserved_bytes,
              (unsigned long long)a.peak_allocated_bytes, (unsigned long long)b.peak_allocated_bytes,
              (unsigned long long)a.device_allocs, (unsigned long long)b.device_allocs,
              (unsigned long long)a.ooms, (unsigned long long)b.ooms);
  EXPECT_EQ(a.peak_reserved_bytes, b.peak_reserved_bytes) << what;
  EXPECT_EQ(a.peak_allocated_bytes, b.peak_allocated_bytes) << what;
  EXPECT_EQ(a.device_allocs, b.device_allocs) << what;
  EXPECT_EQ(a.ooms, b.ooms) << what;
}

TEST(GpuTorchCaching, HolePatternGivesWhatCachingGives) {
  REQUIRE_TORCH_CACHING();
  for (const char* conf : {"", "expandable_segments:True", "max_split_size_mb:128"})
    expect_same_memory(run_both("hole_pattern.yaml", 0, conf, 24 * GiB, 0), std::string("hole_pattern [") + conf + "]");
}

TEST(GpuTorchCaching, TransformerTrainingGivesWhatCachingGives) {
  REQUIRE_TORCH_CACHING();
  for (const char* conf : {"", "expandable_segments:True"}) {
    expect_same_memory(run_both("fixed_seq.yaml", 0, conf, 40 * GiB, 20), std::string("fixed_seq [") + conf + "]");
    expect_same_memory(run_both("dynamic_seq.yaml", 0, conf, 40 * GiB, 40), std::string("dynamic_seq [") + conf + "]");
  }
}

TEST(GpuTorchCaching, AFragmentationOomIsARecordedOomOfPyTorchsAllocator) {
  REQUIRE_TORCH_CACHING();
  const Config config = load_config(gmb::testing::source_path("configs/fragmentation_oom.yaml"));
  const Pair p = run_both("fragmentation_oom.yaml", 0, "", config.device.capacity_bytes, 0);
  expect_same_memory(p, "fragmentation_oom");
  ASSERT_FALSE(p.torch.runs.empty());
  ASSERT_TRUE(p.torch.runs[0].first_oom) << "PyTorch's allocator must hit the engineered OOM";
  ASSERT_TRUE(p.ours.runs[0].first_oom);
  EXPECT_EQ(p.torch.runs[0].first_oom->event, p.ours.runs[0].first_oom->event);
  EXPECT_EQ(p.torch.runs[0].first_oom->requested_bytes, p.ours.runs[0].first_oom->requested_bytes);
}

}  // namespace
