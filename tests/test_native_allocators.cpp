// cuda_managed and cuda_mempool on the simulated device, with the exact figures of the model
// (devices/sim_device.cpp, calibrated on the H200: results/h200/native_allocators.md).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "allocators/registry.h"
#include "devices/forwarding_device.h"
#include "harness/run/runner.h"
#include "workloads/hole_pattern.h"

using namespace gmb;

namespace {

std::unique_ptr<Device> sim(Bytes capacity) {
  SimDeviceOptions o;
  o.capacity_bytes = capacity;
  return make_sim_device(o);
}

// Forwards to a sim device and records the managed-memory hints the allocator gives (without
// passing them on); the sim device counts the calls.
class RecordingDevice final : public ForwardingDevice {
 public:
  explicit RecordingDevice(Bytes capacity) : RecordingDevice(sim(capacity)) {}
  struct Prefetch {
    DevPtr ptr;
    Bytes bytes;
    StreamId stream;
  };
  struct Advice {
    DevPtr ptr;
    Bytes bytes;
    bool preferred, accessed_by;
  };
  std::vector<Prefetch> prefetches;
  std::vector<Advice> advice;

  void prefetch_managed(DevPtr p, Bytes b, StreamId s) override { prefetches.push_back({p, b, s}); }
  void advise_managed(DevPtr p, Bytes b, bool pref, bool acc) override { advice.push_back({p, b, pref, acc}); }

 private:
  explicit RecordingDevice(std::unique_ptr<Device> inner) : ForwardingDevice(*inner), owned_(std::move(inner)) {}
  std::unique_ptr<Device> owned_;
};

CaseResult hole_case(const std::string& allocator, AllocatorOptions options = {}, std::uint64_t repeat = 1) {
  HolePatternParams params;
  params.repeat = repeat;
  CaseSpec spec{allocator, std::move(options), [params] { return make_hole_pattern(params); }};
  return run_case(spec, DeviceSpec{DeviceChoice::Sim, 8 * GiB}, RunSettings{});
}

}  // namespace

// ---------------------------------------------------------------------------------- managed

TEST(CudaManaged, NeverMoreManagedBytesThanTheCapacityAndRefusalsNeverReachTheDriver) {
  auto d = sim(1 * GiB);
  auto a = make_allocator("cuda_managed", *d, {});
  auto p = a->allocate(600 * MiB, 0);
  ASSERT_TRUE(p);
  EXPECT_FALSE(a->allocate(500 * MiB, 0)) << "600 + 500 MiB > 1 GiB";
  EXPECT_EQ(d->counters().managed_mallocs, 1u) << "the refused request must not reach the driver";
  AllocatorStats s = a->stats();
  EXPECT_EQ(s.ooms, 1u);
  EXPECT_EQ(s.allocated_bytes, 600 * MiB);
  EXPECT_EQ(s.reserved_bytes, 600 * MiB);
  EXPECT_TRUE(find_allocator("cuda_managed")->traits.memory_modeled_on_sim);
  OomDetails o = a->last_oom();
  EXPECT_EQ(o.requested_bytes, 500 * MiB);
  EXPECT_NE(o.message.find("refused before reaching the driver"), std::string::npos) << o.message;
  EXPECT_TRUE(a->allocate(424 * MiB, 0)) << "600 + 424 MiB = 1 GiB exactly fits";
  a->deallocate(*p);
  EXPECT_EQ(a->stats().reserved_bytes, 424 * MiB);
}

TEST(CudaManaged, CapIsTheMemoryFreeWhenTheAllocatorStarts) {
  auto d = sim(1 * GiB);
  DevPtr taken = *d->malloc(512 * MiB);  // someone else holds half the card
  auto a = make_allocator("cuda_managed", *d, {});
  EXPECT_TRUE(a->allocate(400 * MiB, 0));
  EXPECT_FALSE(a->allocate(200 * MiB, 0)) << "only 512 MiB were free at start";
  EXPECT_EQ(d->counters().managed_mallocs, 1u);
  d->free(taken);
}

TEST(CudaManaged, Charges64KiBGranules) {
  auto d = sim(1 * GiB);
  auto a = make_allocator("cuda_managed", *d, {});
  ASSERT_TRUE(a->allocate(3 * MiB + 1, 0));
  ASSERT_TRUE(a->allocate(100, 0));
  AllocatorStats s = a->stats();
  EXPECT_EQ(s.allocated_bytes, 3 * MiB + 101);
  EXPECT_EQ(s.reserved_bytes, 3 * MiB + 128 * KiB);
  EXPECT_EQ(d->used_bytes(), 3 * MiB + 128 * KiB) << "managed memory counts toward the sim's capacity";
}

TEST(CudaManaged, PrefetchAndAdviceGoToTheDeviceForEveryAllocation) {
  RecordingDevice d(1 * GiB);
  auto plain = make_allocator("cuda_managed", d, {});
  ASSERT_TRUE(plain->allocate(10 * MiB, 0));
  EXPECT_TRUE(d.prefetches.empty());
  EXPECT_TRUE(d.advice.empty());

  auto a = make_allocator("cuda_managed", d, {{"prefetch", "true"}, {"preferred_location", "true"}});
  DevPtr p = *a->allocate(20 * MiB, 3);
  ASSERT_EQ(d.prefetches.size(), 1u);
  EXPECT_EQ(d.prefetches[0].ptr, p);
  EXPECT_EQ(d.prefetches[0].bytes, 20 * MiB);
  EXPECT_EQ(d.prefetches[0].stream, 3);
  ASSERT_EQ(d.advice.size(), 1u);
  EXPECT_EQ(d.advice[0].ptr, p);
  EXPECT_TRUE(d.advice[0].preferred);
  EXPECT_FALSE(d.advice[0].accessed_by);

  auto b = make_allocator("cuda_managed", d, {{"accessed_by", "true"}});
  ASSERT_TRUE(b->allocate(MiB, 0));
  ASSERT_EQ(d.advice.size(), 2u);
  EXPECT_FALSE(d.advice[1].preferred);
  EXPECT_TRUE(d.advice[1].accessed_by);
  EXPECT_EQ(d.prefetches.size(), 1u);
}

TEST(CudaManaged, BadOptionNamesTheKeyAndTheValidValues) {
  auto d = sim(1 * GiB);
  try {
    make_allocator("cuda_managed", *d, {{"prefetch", "sometimes"}});
    FAIL() << "expected OptionError";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.key, "prefetch");
    EXPECT_EQ(e.valid, "true, false");
  }
  try {
    make_allocator("cuda_managed", *d, {{"prefetch_to", "cpu"}});
    FAIL() << "expected OptionError";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.key, "prefetch_to");
    EXPECT_EQ(e.valid, "prefetch, preferred_location, accessed_by");
  }
}

TEST(CudaManaged, HolePatternOnSimIsModeledAndPageExact) {
  CaseResult r = hole_case("cuda_managed");
  ASSERT_EQ(r.runs.size(), 1u) << r.error;
  EXPECT_TRUE(r.memory_modeled);
  EXPECT_EQ(r.runs[0].peak_allocated_bytes, 650 * MiB);
  EXPECT_EQ(r.runs[0].peak_reserved_bytes, 650 * MiB);  // 100 + 300 + 250 after the 200 went
  EXPECT_FALSE(r.runs[0].first_oom);
}

// ---------------------------------------------------------------------------------- mempool

TEST(CudaMemPool, HolePatternReservesTheH200s704MiB) {
  // Measured through gpumembench on the H200: peak reserved 738197504 bytes, allocated 650 MiB.
  CaseResult r = hole_case("cuda_mempool");
  ASSERT_EQ(r.runs.size(), 1u) << r.error;
  EXPECT_TRUE(r.memory_modeled);
  EXPECT_EQ(r.runs[0].peak_reserved_bytes, 738197504u);
  EXPECT_EQ(r.runs[0].peak_allocated_bytes, 650 * MiB);
  EXPECT_EQ(r.runs[0].device_allocs, 4u) << "each of the four requests grew the pool";
  EXPECT_NEAR(r.runs[0].fragmentation, 1.0 - 650.0 / 704.0, 1e-12);
}

TEST(CudaMemPool, RepeatedHolePatternReusesThePoolWithTheDefaultThreshold) {
  CaseResult r = hole_case("cuda_mempool", {}, 3);
  ASSERT_EQ(r.runs.size(), 1u) << r.error;
  EXPECT_EQ(r.runs[0].peak_reserved_bytes, 704 * MiB);
  EXPECT_EQ(r.runs[0].device_allocs, 4u) << "steps 2 and 3 are served from the pool";
  EXPECT_EQ(r.runs[0].cache_hits, 8u);
}

TEST(CudaMemPool, ThresholdZeroReleasesOnlyAtASync) {
  auto d = sim(8 * GiB);
  auto a = make_allocator("cuda_mempool", *d, {{"release_threshold", "0"}});
  DevPtr p = *a->allocate(100 * MiB, 0);
  EXPECT_EQ(a->stats().reserved_bytes, 128 * MiB);
  a->deallocate(p);
  EXPECT_EQ(a->stats().reserved_bytes, 128 * MiB) << "nothing is released before a synchronization";
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
  EXPECT_EQ(a->stats().peak_reserved_bytes, 128 * MiB);
  EXPECT_EQ(d->used_bytes(), 0u);
}

TEST(CudaMemPool, PeriodicTrimKeepsTrimTo) {
  auto d = sim(8 * GiB);
  auto a = make_allocator("cuda_mempool", *d, {{"trim_every_steps", "2"}, {"trim_to", "64MiB"}});
  DevPtr big = *a->allocate(300 * MiB, 0);  // 320 MiB
  DevPtr small = *a->allocate(20 * MiB, 0);  // at 300 MiB: granule 9, already backed
  EXPECT_EQ(a->stats().reserved_bytes, 320 * MiB);
  a->deallocate(big);
  step_aware(*a)->end_of_step(0);
  EXPECT_EQ(a->stats().reserved_bytes, 320 * MiB) << "step 1 of 2: no trim yet";
  step_aware(*a)->end_of_step(1);
  EXPECT_EQ(a->stats().reserved_bytes, 64 * MiB) << "trimmed to 64 MiB (the live 20 MiB's granule + one)";
  EXPECT_EQ(a->stats().device_frees, 1u);
  step_aware(*a)->end_of_step(3);
  EXPECT_EQ(a->stats().device_frees, 1u) << "a trim that releases nothing is no device free";
  a->deallocate(small);
}

TEST(CudaMemPool, ReuseAttributesDecideCrossStreamReuse) {
  for (bool allow : {true, false}) {
    auto d = sim(8 * GiB);
    AllocatorOptions o;
    if (!allow) o = {{"reuse_allow_opportunistic", "false"}, {"reuse_allow_internal_dependencies", "false"}};
    auto a = make_allocator("cuda_mempool", *d, o);
    DevPtr p = *a->allocate(100 * MiB, 1);
    a->deallocate(p);
    DevPtr q = *a->allocate(100 * MiB, 2);
    EXPECT_EQ(q == p, allow);
    EXPECT_EQ(a->stats().reserved_bytes, allow ? 128 * MiB : 224 * MiB);
  }
}

TEST(CudaMemPool, StatisticsComeFromThePoolAttributes) {
  auto d = sim(8 * GiB);
  auto a = make_allocator("cuda_mempool", *d, {});
  DevPtr p = *a->allocate(1, 0);
  std::map<std::string, std::int64_t> m;
  for (auto& [k, v] : a->memory_stats()) m[k] = v;
  EXPECT_EQ(m["pool.reserved_mem_current"], static_cast<std::int64_t>(32 * MiB));
  EXPECT_EQ(m["pool.used_mem_current"], 1);
  EXPECT_EQ(m["pool.reserved_mem_high"], static_cast<std::int64_t>(32 * MiB));
  a->deallocate(p);
  EXPECT_EQ(a->stats().reserved_bytes, 32 * MiB);
  EXPECT_EQ(a->stats().allocated_bytes, 0u);
}

TEST(CudaMemPool, OutOfMemoryIsRecordedWithWhatThePoolHeld) {
  auto d = sim(256 * MiB);
  auto a = make_allocator("cuda_mempool", *d, {});
  ASSERT_TRUE(a->allocate(200 * MiB, 0));
  EXPECT_FALSE(a->allocate(60 * MiB, 0));
  AllocatorStats s = a->stats();
  EXPECT_EQ(s.ooms, 1u);
  OomDetails o = a->last_oom();
  EXPECT_EQ(o.requested_bytes, 60 * MiB);
  EXPECT_EQ(o.reserved_bytes, 224 * MiB);
  EXPECT_EQ(o.allocated_bytes, 200 * MiB);
  EXPECT_EQ(o.cached_bytes, 24 * MiB);
}

TEST(CudaMemPool, BadOptionsNameTheKeyAndTheValidValues) {
  auto d = sim(1 * GiB);
  struct Bad {
    AllocatorOptions options;
    std::string key, valid_contains;
  };
  for (const Bad& b : std::vector<Bad>{
           {{{"release_threshold", "lots"}}, "release_threshold", "or max"},
           {{{"trim_every_steps", "-3"}}, "trim_every_steps", "0, 1, 2"},
           {{{"trim_to", "1GiB"}}, "trim_to", "trim_every_steps"},
           {{{"reuse_allow_opportunistic", "perhaps"}}, "reuse_allow_opportunistic", "true, false"}}) {
    try {
      make_allocator("cuda_mempool", *d, b.options);
      ADD_FAILURE() << "expected OptionError for " << b.key;
    } catch (const OptionError& e) {
      EXPECT_EQ(e.key, b.key);
      EXPECT_NE(e.valid.find(b.valid_contains), std::string::npos) << e.valid;
    }
  }
  EXPECT_NO_THROW(make_allocator("cuda_mempool", *d, {{"release_threshold", "max"}}));
  EXPECT_NO_THROW(make_allocator("cuda_mempool", *d, {{"release_threshold", "512MiB"}}));
}
