// bfc against TensorFlow's BFCAllocator rules, each expectation worked out by hand from
// xla/tsl/framework/bfc_allocator.cc: 256-byte rounding, the 21 bins, best fit, the split rule,
// coalescing, region doubling with allow_growth, the pre-allocated limit, garbage collection.
#include <gtest/gtest.h>

#include <map>

#include "allocators/bfc/bfc_allocator.h"
#include "allocators/bfc/bfc_bins.h"
#include "allocators/registry.h"
#include "devices/device.h"

using namespace gmb;

namespace {

struct Bfc {
  explicit Bfc(const AllocatorOptions& o, Bytes capacity = 1 * GiB) {
    SimDeviceOptions d;
    d.capacity_bytes = capacity;
    device = make_sim_device(d);
    a = make_allocator("bfc", *device, o);
  }
  DevPtr alloc(Bytes b) {
    auto p = a->allocate(b, 0);
    EXPECT_TRUE(p.has_value()) << b;
    return p.value_or(0);
  }
  std::unique_ptr<Device> device;
  std::unique_ptr<InspectableAllocator> a;
};

TEST(BfcBins, RoundingAndBinsFollowTensorFlow) {
  EXPECT_EQ(bfc::rounded_bytes(1), 256u);
  EXPECT_EQ(bfc::rounded_bytes(256), 256u);
  EXPECT_EQ(bfc::rounded_bytes(257), 512u);
  EXPECT_EQ(bfc::bin_for_size(256), 0);
  EXPECT_EQ(bfc::bin_for_size(511), 0);
  EXPECT_EQ(bfc::bin_for_size(512), 1);
  EXPECT_EQ(bfc::bin_for_size(8 * MiB), 15);            // 8 MiB / 256 = 2^15
  EXPECT_EQ(bfc::bin_for_size(256 * MiB), 20);          // the last bin: 256 << 20
  EXPECT_EQ(bfc::bin_for_size(4 * GiB), 20);            // everything larger too
  EXPECT_EQ(bfc::bin_size(20), 256 * MiB);
  EXPECT_EQ(bfc::rounded_bytes(UINT64_MAX) % 256, 0u) << "saturates, never wraps";
}

TEST(BfcAllocator, GrowthDoublesTheRegionSize) {
  Bfc b({{"allow_growth", "true"}, {"memory_limit", "1GiB"}});
  b.alloc(1 * MiB);  // the first region: 2 MiB; the next one 4 MiB
  EXPECT_EQ(b.a->stats().reserved_bytes, 2 * MiB);
  b.alloc(1536 * KiB);  // the 1 MiB left does not fit: a 4 MiB region (the next: 8 MiB)
  EXPECT_EQ(b.a->stats().reserved_bytes, 6 * MiB);
  b.alloc(20 * MiB);  // more than 8 MiB: doubled to 32 MiB, which stays the next size; the 12 MiB
                      // rest is neither the request's size nor 128 MiB: not split, all in use
  EXPECT_EQ(b.a->stats().reserved_bytes, 38 * MiB);
  EXPECT_EQ(b.a->stats().allocated_bytes, 1 * MiB + 1536 * KiB + 32 * MiB);
  b.alloc(30 * MiB);  // nothing free fits: another 32 MiB region (the next: 64 MiB)
  EXPECT_EQ(b.a->stats().reserved_bytes, 70 * MiB);
  EXPECT_EQ(b.a->stats().device_allocs, 4u);
  EXPECT_EQ(b.a->stats().segments, 4u);
}

TEST(BfcAllocator, SplitsOnlyWhenTheRestIsAsLargeAsTheRequest) {
  Bfc b({{"allow_growth", "true"}, {"memory_limit", "1GiB"}});
  b.alloc(MiB + 1);  // rounded to 1 MiB + 256: the 2 MiB region is not twice that, kept whole
  EXPECT_EQ(b.a->stats().allocated_bytes, 2 * MiB);
  EXPECT_EQ(b.a->stats().requested_bytes, MiB + 1);
  Bfc c({{"allow_growth", "true"}, {"memory_limit", "1GiB"}});
  c.alloc(MiB);  // exactly half: split
  EXPECT_EQ(c.a->stats().allocated_bytes, MiB);
  EXPECT_EQ(c.a->stats().allocs, 1u);
}

TEST(BfcAllocator, PreAllocatesTheLimitAndCoalescesFreedChunks) {
  Bfc b(AllocatorOptions{{"memory_limit", "64MiB"}});
  const DevPtr a = b.alloc(8 * MiB);  // the whole 64 MiB at the first request
  EXPECT_EQ(b.a->stats().reserved_bytes, 64 * MiB);
  b.alloc(8 * MiB);
  const DevPtr c = b.alloc(8 * MiB);
  b.a->deallocate(a);
  b.a->deallocate(c);  // merges with the 40 MiB tail: free chunks 8 and 48 MiB
  auto f = b.a->free_space();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->free_bytes, 56 * MiB);
  EXPECT_EQ(f->largest_free_bytes, 48 * MiB);
  // Best fit: 4 MiB goes into the 8 MiB hole (bin 15), not the 48 MiB chunk (bin 17).
  const DevPtr d = b.alloc(4 * MiB);
  EXPECT_EQ(d, a);
  b.a->deallocate(d);
  EXPECT_EQ(b.a->free_space()->largest_free_bytes, 48 * MiB) << "the hole is whole again, 8 MiB";
  EXPECT_EQ(b.a->stats().device_allocs, 1u);
  EXPECT_EQ(b.a->stats().cache_hits, 3u) << "every request but the first from the region";
}

TEST(BfcAllocator, TheLimitComesFromTensorFlowsOptions) {
  EXPECT_EQ(bfc_memory_limit({}, 1 * GiB), 1 * GiB - 225 * MiB) << "below 2 GiB TF keeps 225 MiB";
  EXPECT_EQ(bfc_memory_limit({}, 24 * GiB), 24 * GiB - 1800 * MiB) << "compute capability 9: 1800 MiB";
  EXPECT_EQ(bfc_memory_limit({{"per_process_gpu_memory_fraction", "0.5"}}, 1 * GiB), 512 * MiB);
  EXPECT_EQ(bfc_memory_limit({{"memory_limit", "100MiB"}}, 1 * GiB), 100 * MiB);
  Bfc b(AllocatorOptions{{"per_process_gpu_memory_fraction", "0.5"}});
  b.alloc(MiB);
  EXPECT_EQ(b.a->stats().reserved_bytes, 512 * MiB);
  EXPECT_FALSE(b.a->allocate(600 * MiB, 0).has_value()) << "above the limit: an OOM";
  EXPECT_EQ(b.a->last_oom().limit_bytes, 512 * MiB);
}

TEST(BfcAllocator, GarbageCollectionFreesIdleRegionsOnTheRetryPath) {
  for (bool gc : {true, false}) {
    Bfc b({{"allow_growth", "true"}, {"memory_limit", "64MiB"}, {"garbage_collection", gc ? "true" : "false"}});
    const DevPtr x = b.alloc(MiB);      // region 2 MiB
    const DevPtr y = b.alloc(3 * MiB);  // region 4 MiB
    b.a->deallocate(x);
    b.a->deallocate(y);
    // 60 MiB: 58 MiB are left under the limit; only freeing the two idle regions makes room.
    auto p = b.a->allocate(60 * MiB, 0);
    EXPECT_EQ(p.has_value(), gc);
    if (gc) {
      EXPECT_EQ(b.a->stats().device_frees, 2u);
      EXPECT_EQ(b.a->stats().reserved_bytes, 64 * MiB) << "one region: 8 MiB doubled up to 64 MiB";
      EXPECT_EQ(b.a->stats().alloc_retries, 1u);
    } else {
      EXPECT_EQ(b.a->stats().ooms, 1u);
      EXPECT_FALSE(b.a->last_oom().retried_after_freeing_cache);
      EXPECT_EQ(b.a->last_oom().largest_free_block, 4 * MiB);
    }
  }
}

TEST(BfcAllocator, StatsUseTensorFlowsNames) {
  Bfc b({{"allow_growth", "true"}, {"memory_limit", "1GiB"}});
  const DevPtr p = b.alloc(1000);
  b.alloc(2 * MiB);  // a 4 MiB region, split in two
  b.a->deallocate(p);
  std::map<std::string, std::int64_t> s;
  for (const auto& [k, v] : b.a->memory_stats()) s[k] = v;
  EXPECT_EQ(s.at("num_allocs"), 2);
  EXPECT_EQ(s.at("bytes_in_use"), std::int64_t(2 * MiB));
  EXPECT_EQ(s.at("peak_bytes_in_use"), std::int64_t(2 * MiB + 1024));
  EXPECT_EQ(s.at("largest_alloc_size"), std::int64_t(2 * MiB));
  EXPECT_EQ(s.at("bytes_reserved"), std::int64_t(6 * MiB));  // 2 MiB, then 4 MiB
  EXPECT_EQ(s.at("bytes_limit"), std::int64_t(1 * GiB));
}

TEST(BfcAllocator, BadOptionsNameTheKey) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"per_process_gpu_memory_fraction", "1.5"},
           {"per_process_gpu_memory_fraction", "half"},
           {"allow_growth", "maybe"},
           {"memory_limit", "lots"}}) {
    try {
      validate_allocator_options("bfc", {{key, value}});
      ADD_FAILURE() << key << "=" << value;
    } catch (const OptionError& e) {
      EXPECT_EQ(e.key, key);
      EXPECT_FALSE(e.valid.empty());
    }
  }
}

}  // namespace
