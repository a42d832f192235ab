// ideal: the lower bound holds exactly the live bytes (rounded as PyTorch rounds them when
// asked), so its peak is the workload's own peak need, on any workload.
#include <gtest/gtest.h>

#include "allocators/registry.h"
#include "harness/run/runner.h"
#include "workloads/hole_pattern.h"

using namespace gmb;

namespace {

CaseResult hole_case(const std::string& allocator, AllocatorOptions o, Bytes capacity = 8 * GiB) {
  CaseSpec spec{allocator, std::move(o), [] { return make_hole_pattern(HolePatternParams{}); }};
  return run_case(spec, DeviceSpec{DeviceChoice::Sim, capacity}, RunSettings{});
}

TEST(IdealAllocator, HoldsExactlyTheLiveBytes) {
  SimDeviceOptions d;
  d.capacity_bytes = 1 * GiB;
  auto device = make_sim_device(d);
  auto a = make_allocator("ideal", *device, {});
  auto p = a->allocate(1000, 0);
  auto q = a->allocate(3 * MiB + 7, 0);
  ASSERT_TRUE(p && q);
  EXPECT_EQ(a->stats().reserved_bytes, 3 * MiB + 1007);
  EXPECT_EQ(a->stats().allocated_bytes, 3 * MiB + 1007);
  a->deallocate(*p);
  EXPECT_EQ(a->stats().reserved_bytes, 3 * MiB + 7) << "what is freed is given back at once";
  EXPECT_EQ(a->stats().peak_reserved_bytes, 3 * MiB + 1007);
  EXPECT_EQ(a->stats().device_allocs, 0u);
  EXPECT_EQ(device->used_bytes(), 0u);
  EXPECT_FALSE(a->allocate(1 * GiB, 0).has_value()) << "3 MiB live plus 1 GiB is more than the card";
}

TEST(IdealAllocator, PytorchRoundingRoundsLikeTheCachingAllocator) {
  SimDeviceOptions d;
  auto device = make_sim_device(d);
  auto a = make_allocator("ideal", *device, {{"rounding", "pytorch"}});
  ASSERT_TRUE(a->allocate(1, 0));
  ASSERT_TRUE(a->allocate(513, 0));
  ASSERT_TRUE(a->allocate(3 * MiB + 1, 0));
  EXPECT_EQ(a->stats().allocated_bytes, 512 + 1024 + 3 * MiB + 512);
  EXPECT_EQ(a->stats().requested_bytes, 1 + 513 + 3 * MiB + 1);
  EXPECT_EQ(a->free_space()->free_bytes, 0u);
  EXPECT_THROW(validate_allocator_options("ideal", {{"rounding", "tf"}}), OptionError);
}

TEST(IdealAllocator, ItsPeakIsTheWorkloadsNeed) {
  const CaseResult plain = hole_case("ideal", {});
  const CaseResult rounded = hole_case("ideal", {{"rounding", "pytorch"}});
  ASSERT_TRUE(plain.error.empty()) << plain.error;
  EXPECT_EQ(plain.runs.front().peak_reserved_bytes, plain.need->peak_requested_bytes);
  EXPECT_EQ(rounded.runs.front().peak_reserved_bytes, rounded.need->peak_rounded_bytes);
  EXPECT_EQ(plain.runs.front().fragmentation, 0.0);
  EXPECT_EQ(plain.runs.front().device_allocs, 0u);
  // Every other allocator holds at least as much on the same workload.
  for (const char* name : {"caching", "bfc", "cuda_malloc"}) {
    const CaseResult c = hole_case(name, {});
    EXPECT_GE(c.runs.front().peak_reserved_bytes, plain.runs.front().peak_reserved_bytes) << name;
  }
}

TEST(IdealAllocator, IsABoundInTheRegistry) {
  EXPECT_TRUE(find_allocator("ideal")->traits.lower_bound);
  EXPECT_FALSE(find_allocator("bfc")->traits.lower_bound);
  EXPECT_FALSE(find_allocator("bfc")->traits.memory_modeled_on_sim) << "bfc's decisions are its own";
}

}  // namespace
