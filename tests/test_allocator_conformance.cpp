// What every allocator must do, checked on the simulated device for every registry entry: a
// new entry gets these tests without a line here.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "allocators/adaptors/statistics_allocator.h"
#include "allocators/registry.h"
#include "devices/device.h"

using namespace gmb;

namespace {

constexpr Bytes kCapacity = 1 * GiB;

std::vector<std::string> registry_names() {
  std::vector<std::string> names;
  for (const AllocatorEntry& e : allocator_registry())
    if (e.traits.runs_on_sim) names.push_back(e.name);  // the GPU-only ones have their Gpu* tests
  return names;
}

class AllocatorConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SimDeviceOptions o;
    o.capacity_bytes = kCapacity;
    device_ = make_sim_device(o);
    used_at_start_ = device_->used_bytes();
    allocator_ = make_allocator(GetParam(), *device_, {});
  }
  InspectableAllocator& a() { return *allocator_; }

  // The invariants that hold after any call: what the allocator holds covers what it handed out,
  // which covers what was asked for; peaks are never below the current figures.
  void expect_stats_consistent(Bytes live_requested) {
    const AllocatorStats s = a().stats();
    EXPECT_EQ(s.requested_bytes, live_requested);
    EXPECT_GE(s.allocated_bytes, s.requested_bytes);
    EXPECT_GE(s.reserved_bytes, s.allocated_bytes);
    EXPECT_GE(s.peak_allocated_bytes, s.allocated_bytes);
    EXPECT_GE(s.peak_reserved_bytes, s.reserved_bytes);
    const MemoryInUse u = a().in_use();
    EXPECT_EQ(u.allocated_bytes, s.allocated_bytes);
    EXPECT_EQ(u.reserved_bytes, s.reserved_bytes);
  }

  std::unique_ptr<Device> device_;
  Bytes used_at_start_ = 0;
  std::unique_ptr<InspectableAllocator> allocator_;
};

TEST_P(AllocatorConformance, AllocatesAndFrees) {
  auto p = a().allocate(3 * MiB, 0);
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(*p, 0u);
  expect_stats_consistent(3 * MiB);
  EXPECT_EQ(a().stats().allocs, 1u);
  a().deallocate(*p);
  expect_stats_consistent(0);
  EXPECT_EQ(a().stats().allocated_bytes, 0u);
  EXPECT_EQ(a().stats().frees, 1u);
  EXPECT_EQ(a().stats().ooms, 0u);
}

TEST_P(AllocatorConformance, ZeroBytesIsNotAnOom) {
  auto p = a().allocate(0, 0);
  ASSERT_TRUE(p.has_value()) << "a 0-byte request succeeds";
  EXPECT_EQ(a().stats().ooms, 0u);
  a().deallocate(*p);
  expect_stats_consistent(0);
  EXPECT_EQ(a().stats().allocated_bytes, 0u);
}

// The driver gives nullptr for 0 bytes and takes nothing (scripts/probe/zero_byte_probe.cu on
// the H200): several live at once ask the device for nothing, and their frees free nothing.
TEST_P(AllocatorConformance, ZeroByteRequestsAskTheDeviceForNothing) {
  const DeviceCounters before = device_->counters();
  std::vector<DevPtr> zeros;
  for (int i = 0; i < 3; ++i) {
    auto p = a().allocate(0, 0);
    ASSERT_TRUE(p.has_value());
    zeros.push_back(*p);
  }
  auto real = a().allocate(100, 0);
  ASSERT_TRUE(real.has_value());
  for (DevPtr p : zeros) a().deallocate(p);
  expect_stats_consistent(100);
  const DeviceCounters mid = device_->counters();
  EXPECT_EQ(mid.frees + mid.managed_frees + mid.async_frees,
            before.frees + before.managed_frees + before.async_frees) << "no free for a 0-byte block";
  EXPECT_LE(a().stats().device_allocs, 1u) << "at most the 100-byte request asked the device";
  a().deallocate(*real);
  expect_stats_consistent(0);
}

TEST_P(AllocatorConformance, RequestAboveCapacityIsARecordedOom) {
  auto small = a().allocate(1 * MiB, 0);
  ASSERT_TRUE(small.has_value());
  const Bytes too_large = kCapacity + 1 * GiB;
  EXPECT_FALSE(a().allocate(too_large, 0).has_value());
  EXPECT_EQ(a().stats().ooms, 1u);
  const OomDetails oom = a().last_oom();
  EXPECT_EQ(oom.requested_bytes, too_large);
  EXPECT_FALSE(oom.message.empty());
  expect_stats_consistent(1 * MiB);
  // The allocator goes on after an OOM.
  auto after = a().allocate(2 * MiB, 0);
  ASSERT_TRUE(after.has_value());
  a().deallocate(*after);
  a().deallocate(*small);
  expect_stats_consistent(0);
}

TEST_P(AllocatorConformance, StatsAddUp) {
  const std::vector<Bytes> sizes = {512, 1000, 1 * MiB, 3 * MiB + 7, 20 * MiB, 64 * MiB};
  std::vector<DevPtr> live;
  Bytes requested = 0;
  for (Bytes b : sizes) {
    auto p = a().allocate(b, 0);
    ASSERT_TRUE(p.has_value()) << b;
    live.push_back(*p);
    requested += b;
    expect_stats_consistent(requested);
  }
  EXPECT_EQ(a().stats().allocs, sizes.size());
  for (std::size_t i = 0; i < live.size(); i += 2) {  // every other one
    a().deallocate(live[i]);
    requested -= sizes[i];
    expect_stats_consistent(requested);
  }
  for (std::size_t i = 1; i < live.size(); i += 2) a().deallocate(live[i]);
  expect_stats_consistent(0);
  const AllocatorStats s = a().stats();
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.frees, sizes.size());
  Bytes all_live = 0;
  for (Bytes b : sizes) all_live += b;
  EXPECT_GE(s.peak_allocated_bytes, all_live) << "every request was live at once";
}

// The allocator's own statistics against an outside count (the statistics adaptor) over a seeded
// random mix of sizes from 1 byte to 200 MiB, frees in random order and OOMs (the mix asks for
// more than the 1 GiB device at times).
TEST_P(AllocatorConformance, OwnStatsAgreeWithAnOutsideCountOnARandomMix) {
  StatisticsAllocator counted(std::move(allocator_));
  std::mt19937_64 rng(7);
  std::vector<DevPtr> live;
  for (int i = 0; i < 400; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t k = rng() % live.size();
      counted.deallocate(live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      const Bytes b = 1 + rng() % (rng() % 4 == 0 ? 200 * MiB : 64 * KiB);
      if (auto p = counted.allocate(b, 0)) live.push_back(*p);
    }
    const AllocatorStats s = counted.stats();
    ASSERT_EQ(s.requested_bytes, counted.current().bytes) << "event " << i;
    ASSERT_EQ(s.allocs - s.frees, counted.current().allocations) << "event " << i;
    ASSERT_GE(s.allocated_bytes, s.requested_bytes);
    ASSERT_GE(s.reserved_bytes, s.allocated_bytes);
    ASSERT_GE(s.peak_allocated_bytes, counted.peak().bytes) << "event " << i;
  }
  EXPECT_GT(counted.failed(), 0u) << "the mix must reach an OOM to test one";
  EXPECT_EQ(counted.stats().ooms, counted.failed());
  EXPECT_EQ(counted.stats().allocs, counted.total().allocations);
  for (DevPtr p : live) counted.deallocate(p);
  EXPECT_EQ(counted.stats().requested_bytes, 0u);
  EXPECT_EQ(counted.stats().allocated_bytes, 0u);
}

TEST_P(AllocatorConformance, EmptyCacheReturnsMemoryToTheDevice) {
  std::vector<DevPtr> live;
  for (Bytes b : {1 * MiB, 30 * MiB, 100 * MiB}) {
    auto p = a().allocate(b, 0);
    ASSERT_TRUE(p.has_value());
    live.push_back(*p);
  }
  // A bound (ideal) holds no device memory at all.
  const bool bound = find_allocator(GetParam())->traits.lower_bound;
  if (!bound) {
    EXPECT_GT(device_->used_bytes(), used_at_start_);
  }
  for (DevPtr p : live) a().deallocate(p);
  a().empty_cache();
  EXPECT_EQ(a().stats().reserved_bytes, 0u);
  EXPECT_EQ(device_->used_bytes(), used_at_start_);
}

TEST_P(AllocatorConformance, OptionsValidateWithoutADevice) {
  const AllocatorEntry* entry = find_allocator(GetParam());
  ASSERT_NE(entry, nullptr);
  EXPECT_NO_THROW(validate_allocator_options(GetParam(), {}));
  try {
    validate_allocator_options(GetParam(), {{"no_such_option", "1"}});
    ADD_FAILURE() << "an unknown key is an error";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.key, "no_such_option");
  }
  // Every key of the schema says which values it takes.
  for (const AllocatorOption& o : entry->options) EXPECT_FALSE(o.valid.empty()) << o.key;
}

INSTANTIATE_TEST_SUITE_P(EveryRegistryEntry, AllocatorConformance, ::testing::ValuesIn(registry_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
