// The caching allocator against numbers worked out from PyTorch 2.11's rules (and, for the
// hole pattern, measured on the H200 with real PyTorch 2.11: 850 MiB reserved, 4 segments).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "allocators/caching/caching_allocator.h"
#include "devices/device.h"

namespace gmb {
namespace {

struct Fixture {
  explicit Fixture(const std::string& conf = "", Bytes capacity = 80 * GiB,
                   const std::string& limit = "") {
    SimDeviceOptions o;
    o.capacity_bytes = capacity;
    device = make_sim_device(o);
    AllocatorOptions opts;
    if (!conf.empty()) opts["alloc_conf"] = conf;
    if (!limit.empty()) opts["memory_limit_bytes"] = limit;
    alloc = make_caching_allocator(*device, opts);
  }
  std::int64_t stat(const std::string& key) const {
    for (const auto& [k, v] : alloc->memory_stats())
      if (k == key) return v;
    ADD_FAILURE() << "no memory_stats key " << key;
    return -1;
  }
  DevPtr a(Bytes bytes, StreamId stream = 0) {
    auto p = alloc->allocate(bytes, stream);
    EXPECT_TRUE(p.has_value()) << "unexpected OOM for " << bytes;
    return p.value_or(0);
  }
  Bytes allocated() const { return alloc->stats().allocated_bytes; }
  Bytes reserved() const { return alloc->stats().reserved_bytes; }

  std::unique_ptr<Device> device;
  std::unique_ptr<InspectableAllocator> alloc;
};

TEST(CachingAllocator, HolePatternNative) {
  Fixture f;
  f.a(100 * MiB);
  DevPtr b = f.a(200 * MiB);
  f.a(300 * MiB);
  f.alloc->deallocate(b);
  f.a(250 * MiB);
  EXPECT_EQ(f.reserved(), 850 * MiB);
  EXPECT_EQ(f.allocated(), 650 * MiB);
  EXPECT_EQ(f.alloc->stats().segments, 4u);
  EXPECT_EQ(f.stat("segment.large_pool.current"), 4);
  EXPECT_EQ(f.stat("num_device_alloc"), 4);
  EXPECT_EQ(f.alloc->stats().cache_hits, 0u);
  EXPECT_EQ(f.alloc->segments().size(), 4u);
}

TEST(CachingAllocator, HolePatternExpandable) {
  Fixture f("expandable_segments:True");
  f.a(100 * MiB);
  DevPtr b = f.a(200 * MiB);
  f.a(300 * MiB);
  f.alloc->deallocate(b);
  f.a(250 * MiB);
  EXPECT_EQ(f.reserved(), 860 * MiB);
  EXPECT_EQ(f.allocated(), 650 * MiB);
  // PyTorch counts no "segment" for expandable segments: they are mapped, not cudaMalloc'ed.
  EXPECT_EQ(f.stat("segment.all.current"), 0);
  EXPECT_EQ(f.stat("num_device_alloc"), 4);  // one map per growth
  // One mapped range per segment: 100+200+300 MiB, then 260 MiB appended at its end.
  auto segs = f.alloc->segments();
  ASSERT_EQ(segs.size(), 1u);
  EXPECT_EQ(segs[0].size, 860 * MiB);
  EXPECT_EQ(f.device->used_bytes(), 860 * MiB);
}

TEST(CachingAllocator, RoundsTo512AndPicksPool) {
  Fixture f;
  f.a(1);
  EXPECT_EQ(f.allocated(), 512u);
  EXPECT_EQ(f.stat("requested_bytes.all.current"), 1);
  f.a(513);
  EXPECT_EQ(f.allocated(), 512u + 1024u);
  EXPECT_EQ(f.reserved(), 2 * MiB);  // both in one 2 MiB small segment
  f.a(1 * MiB);                       // still small (<= 1 MiB), same segment
  EXPECT_EQ(f.stat("allocated_bytes.small_pool.current"), static_cast<std::int64_t>(1536 + MiB));
  EXPECT_EQ(f.reserved(), 2 * MiB);
  f.a(1 * MiB + 1);  // large pool, 20 MiB segment, rounded to 1 MiB + 512
  EXPECT_EQ(f.stat("allocated_bytes.large_pool.current"), static_cast<std::int64_t>(MiB + 512));
  EXPECT_EQ(f.stat("reserved_bytes.large_pool.current"), static_cast<std::int64_t>(20 * MiB));
  f.a(12 * MiB + 1);  // served by the rest of that 20 MiB segment
  EXPECT_EQ(f.stat("reserved_bytes.large_pool.current"), static_cast<std::int64_t>(20 * MiB));
  f.a(20 * MiB + 1);  // >= 10 MiB: its own segment, rounded up to 2 MiB
  EXPECT_EQ(f.stat("reserved_bytes.large_pool.current"), static_cast<std::int64_t>(42 * MiB));
}

TEST(CachingAllocator, SmallBlocksPackAndSplit) {
  Fixture f;
  DevPtr p1 = f.a(100);
  DevPtr p2 = f.a(100);
  DevPtr p3 = f.a(2000);
  EXPECT_EQ(p2, p1 + 512);
  EXPECT_EQ(p3, p1 + 1024);
  EXPECT_EQ(f.alloc->stats().segments, 1u);
  // The rest of the segment is an inactive split block.
  EXPECT_EQ(f.stat("inactive_split.small_pool.current"), 1);
  EXPECT_EQ(f.stat("inactive_split_bytes.small_pool.current"),
            static_cast<std::int64_t>(2 * MiB - 512 - 512 - 2048));
  f.alloc->deallocate(p2);  // a hole between two live blocks: one more inactive split block
  EXPECT_EQ(f.stat("inactive_split.all.current"), 2);
  f.alloc->deallocate(p1);  // merges with the hole
  EXPECT_EQ(f.stat("inactive_split.all.current"), 2);
  EXPECT_EQ(f.stat("inactive_split_bytes.all.current"),
            static_cast<std::int64_t>(2 * MiB - 2048));
  f.alloc->deallocate(p3);  // whole segment free again: nothing split
  EXPECT_EQ(f.stat("inactive_split.all.current"), 0);
  EXPECT_EQ(f.stat("inactive_split_bytes.all.current"), 0);
  EXPECT_EQ(f.a(700), p1);  // best fit from the lowest address
  EXPECT_EQ(f.alloc->stats().cache_hits, 3u);
}

TEST(CachingAllocator, LargeSplitRules) {
  Fixture f;
  DevPtr a = f.a(5 * MiB);  // 20 MiB segment, split: 15 MiB remain
  EXPECT_EQ(f.reserved(), 20 * MiB);
  EXPECT_EQ(f.stat("inactive_split_bytes.large_pool.current"), static_cast<std::int64_t>(15 * MiB));
  DevPtr b = f.a(5 * MiB);
  EXPECT_EQ(b, a + 5 * MiB);
  EXPECT_EQ(f.reserved(), 20 * MiB);
  // 9.5 MiB left; a 9 MiB request leaves 0.5 MiB <= 1 MiB: not split, the whole rest is used.
  f.a(9 * MiB);
  EXPECT_EQ(f.allocated(), 20 * MiB);
  EXPECT_EQ(f.stat("inactive_split.all.current"), 0);
  // A 19 MiB + 1 request gets a 20 MiB segment; the 1 MiB - 512 rest is not split off.
  Fixture g;
  g.a(19 * MiB + 1);
  EXPECT_EQ(g.allocated(), 20 * MiB);
  EXPECT_EQ(g.stat("requested_bytes.all.current"), static_cast<std::int64_t>(19 * MiB + 1));
}

TEST(CachingAllocator, EqualSizeTiesTakeLowestAddress) {
  Fixture f;
  DevPtr x = f.a(100 * MiB);
  DevPtr y = f.a(100 * MiB);
  f.alloc->deallocate(x);
  f.alloc->deallocate(y);
  EXPECT_EQ(f.a(100 * MiB), std::min(x, y));
  EXPECT_EQ(f.reserved(), 200 * MiB);
}

TEST(CachingAllocator, MaxSplitSize) {
  Fixture f("max_split_size_mb:40");
  DevPtr a = f.a(50 * MiB);
  f.alloc->deallocate(a);
  f.a(30 * MiB);  // below max_split_size: never served from an oversize (>= 40 MiB) block
  EXPECT_EQ(f.reserved(), 80 * MiB);
  EXPECT_EQ(f.stat("oversize_segments.current"), 1);
  DevPtr c = f.a(45 * MiB);  // >= max_split_size: 50 < 45 + 20, the cached block is used whole
  EXPECT_EQ(c, a);
  EXPECT_EQ(f.reserved(), 80 * MiB);
  EXPECT_EQ(f.stat("allocated_bytes.all.current"), static_cast<std::int64_t>(80 * MiB));
  EXPECT_EQ(f.stat("oversize_allocations.current"), 1);
  EXPECT_EQ(f.stat("max_split_size"), static_cast<std::int64_t>(40 * MiB));

  Fixture g("max_split_size_mb:40");
  g.alloc->deallocate(g.a(64 * MiB));
  g.a(40 * MiB);  // 64 >= 40 + 20: too much rounding, a new segment
  EXPECT_EQ(g.reserved(), 104 * MiB);

  Fixture h("max_split_size_mb:40,max_non_split_rounding_mb:64");
  h.alloc->deallocate(h.a(100 * MiB));
  h.a(50 * MiB);  // 100 < 50 + 64: served by the cached 100 MiB block
  EXPECT_EQ(h.reserved(), 100 * MiB);
  EXPECT_EQ(h.allocated(), 100 * MiB);
}

TEST(CachingAllocator, RoundupPower2Divisions) {
  Fixture f("roundup_power2_divisions:4");
  f.a(1200000);  // 1 MiB .. 2 MiB in 4 steps of 256 KiB -> 1.25 MiB
  EXPECT_EQ(f.allocated(), 1310720u);
  f.a(5 * MiB + 1);  // 4 .. 8 MiB in steps of 1 MiB -> 6 MiB
  EXPECT_EQ(f.allocated(), 1310720u + 6 * MiB);
  f.a(1500);  // 1024 .. 2048 in steps of 256 -> 1536
  EXPECT_EQ(f.allocated(), 1310720u + 6 * MiB + 1536);
  f.a(1025);  // 1025 > 512 * 4 is false: plain 512 rounding -> 1536
  EXPECT_EQ(f.allocated(), 1310720u + 6 * MiB + 3072);

  Fixture g("roundup_power2_divisions:[256:1,512:2,>:8]");
  g.a(100 * MiB + 1);  // below 256 MiB: 1 division, 512-byte rounding
  EXPECT_EQ(g.allocated(), 100 * MiB + 512);
  g.a(600 * MiB + 1);  // 512 MiB .. 1 GiB: 2 divisions -> 768 MiB
  EXPECT_EQ(g.allocated(), 100 * MiB + 512 + 768 * MiB);
  g.a(3 * GiB + 1);  // >= 1 GiB: 8 divisions of the 2 GiB interval -> 3.25 GiB
  EXPECT_EQ(g.allocated(), 100 * MiB + 512 + 768 * MiB + 3 * GiB + 256 * MiB);
}

TEST(CachingAllocator, OomAfterFreeingCacheAndRetryCounts) {
  Fixture f("", 80 * GiB, "1GiB");
  DevPtr a = f.a(600 * MiB);
  f.alloc->deallocate(a);
  // 600 cached + 700 > 1 GiB: the cache is freed, then the retry succeeds.
  f.a(700 * MiB);
  EXPECT_EQ(f.stat("num_alloc_retries"), 1);
  EXPECT_EQ(f.stat("num_ooms"), 0);
  EXPECT_EQ(f.stat("num_device_free"), 1);
  EXPECT_EQ(f.stat("num_sync_all_streams"), 1);
  EXPECT_EQ(f.reserved(), 700 * MiB);
  // 700 + 400 > 1 GiB and nothing is cached: OOM after a second retry.
  auto p = f.alloc->allocate(400 * MiB, 0);
  EXPECT_FALSE(p.has_value());
  EXPECT_EQ(f.stat("num_alloc_retries"), 2);
  EXPECT_EQ(f.stat("num_ooms"), 1);
  OomDetails o = f.alloc->last_oom();
  EXPECT_EQ(o.requested_bytes, 400 * MiB);
  EXPECT_EQ(o.reserved_bytes, 700 * MiB);
  EXPECT_EQ(o.allocated_bytes, 700 * MiB);
  EXPECT_TRUE(o.retried_after_freeing_cache);
  EXPECT_NE(o.message.find("Tried to allocate 400.00 MiB"), std::string::npos) << o.message;
  EXPECT_NE(o.message.find("1024.00 MiB allowed"), std::string::npos) << o.message;
  // 324 MiB still fits exactly under the limit.
  f.a(324 * MiB);
  EXPECT_EQ(f.reserved(), 1 * GiB);
  EXPECT_FALSE(f.alloc->allocate(1, 0).has_value());  // even a 2 MiB small segment is too much
  EXPECT_EQ(f.stat("num_ooms"), 2);
}

TEST(CachingAllocator, ReleasesOversizeBlocksBeforeFlushingTheCache) {
  Fixture f("max_split_size_mb:100", 80 * GiB, "1GiB");
  DevPtr x = f.a(300 * MiB);
  DevPtr y = f.a(300 * MiB);
  f.a(200 * MiB);
  f.alloc->deallocate(x);
  f.alloc->deallocate(y);
  // 800 + 500 > 1 GiB: the two oversize 300 MiB blocks go (largest first) without a retry.
  f.a(500 * MiB);
  EXPECT_EQ(f.stat("num_alloc_retries"), 0);
  EXPECT_EQ(f.stat("num_device_free"), 2);
  EXPECT_EQ(f.stat("num_sync_all_streams"), 0);
  EXPECT_EQ(f.reserved(), 700 * MiB);

  // Without max_split_size the same sequence needs the full flush and a retry.
  Fixture g("", 80 * GiB, "1GiB");
  x = g.a(300 * MiB);
  y = g.a(300 * MiB);
  g.a(200 * MiB);
  g.alloc->deallocate(x);
  g.alloc->deallocate(y);
  g.a(500 * MiB);
  EXPECT_EQ(g.stat("num_alloc_retries"), 1);
  EXPECT_EQ(g.stat("num_sync_all_streams"), 1);
  EXPECT_EQ(g.reserved(), 700 * MiB);
}

TEST(CachingAllocator, CapacityIsTheLimitAndFractionSetsIt) {
  Fixture f("", 1 * GiB);
  f.a(1000 * MiB);
  EXPECT_FALSE(f.alloc->allocate(30 * MiB, 0).has_value());
  EXPECT_EQ(f.stat("num_ooms"), 1);

  Fixture g("per_process_memory_fraction:0.5", 2 * GiB);
  g.a(1 * GiB);
  EXPECT_FALSE(g.alloc->allocate(1, 0).has_value());  // 1 GiB + 2 MiB > 1 GiB
  Fixture h("", 2 * GiB, "1GiB");
  h.a(1 * GiB);
  EXPECT_FALSE(h.alloc->allocate(1, 0).has_value());
  Fixture k("", 2 * GiB, "1073741825");  // one byte more fits no 2 MiB segment either
  k.a(1 * GiB);
  EXPECT_FALSE(k.alloc->allocate(1, 0).has_value());
}

TEST(CachingAllocator, GarbageCollectionFreesOldBlocksUnderTheLimit) {
  Fixture f("garbage_collection_threshold:0.5", 80 * GiB, "1GiB");
  f.alloc->deallocate(f.a(200 * MiB));
  f.a(400 * MiB);  // 200 MiB in use by the allocator <= 512 MiB: no collection
  EXPECT_EQ(f.reserved(), 600 * MiB);
  f.a(300 * MiB);  // 600 > 512: the unsplit cached 200 MiB block is collected
  EXPECT_EQ(f.reserved(), 700 * MiB);
  EXPECT_EQ(f.stat("num_device_free"), 1);
  EXPECT_EQ(f.stat("num_alloc_retries"), 0);

  Fixture g("", 80 * GiB, "1GiB");  // the same without a threshold keeps the cached block
  g.alloc->deallocate(g.a(200 * MiB));
  g.a(400 * MiB);
  g.a(300 * MiB);
  EXPECT_EQ(g.reserved(), 900 * MiB);
}

TEST(CachingAllocator, StreamsOwnTheirBlocks) {
  Fixture f;
  DevPtr a = f.a(1000);
  f.alloc->deallocate(a);
  DevPtr b = f.a(1000, 1);  // the cached block belongs to stream 0
  EXPECT_EQ(f.reserved(), 4 * MiB);
  EXPECT_EQ(f.alloc->stats().segments, 2u);
  EXPECT_EQ(f.a(1000, 0), a);  // stream 0 reuses its own
  f.alloc->deallocate(b);
  EXPECT_EQ(f.a(900, 1), b);
  auto segs = f.alloc->segments();
  ASSERT_EQ(segs.size(), 2u);
  std::map<StreamId, int> per_stream;
  for (const auto& s : segs) per_stream[s.stream]++;
  EXPECT_EQ(per_stream[0], 1);
  EXPECT_EQ(per_stream[1], 1);
}

TEST(CachingAllocator, EmptyCacheReleasesOnlyUnsplitFreeSegments) {
  Fixture f;
  DevPtr a = f.a(100 * MiB);
  DevPtr b = f.a(5 * MiB);
  DevPtr c = f.a(5 * MiB);  // same 20 MiB segment as b
  f.alloc->deallocate(a);
  f.alloc->deallocate(b);
  f.alloc->empty_cache();
  EXPECT_EQ(f.reserved(), 20 * MiB);  // the 20 MiB segment still holds c
  EXPECT_EQ(f.stat("num_device_free"), 1);
  EXPECT_EQ(f.device->used_bytes(), 20 * MiB);
  f.alloc->deallocate(c);
  f.alloc->empty_cache();
  EXPECT_EQ(f.reserved(), 0u);
  EXPECT_EQ(f.alloc->stats().segments, 0u);
  EXPECT_EQ(f.device->used_bytes(), 0u);
  EXPECT_EQ(f.stat("reserved_bytes.all.peak"), static_cast<std::int64_t>(120 * MiB));
}

TEST(CachingAllocator, ExpandableSegmentsGrowShrinkAndSplitFinely) {
  Fixture f("expandable_segments:True");
  DevPtr a = f.a(1000);
  EXPECT_EQ(f.reserved(), 2 * MiB);  // one small 2 MiB page
  DevPtr b = f.a(30 * MiB);
  EXPECT_EQ(f.stat("reserved_bytes.large_pool.current"), static_cast<std::int64_t>(40 * MiB));
  DevPtr c = f.a(5 * MiB);  // fits in the 10 MiB mapped tail
  EXPECT_EQ(c, b + 30 * MiB);
  EXPECT_EQ(f.stat("reserved_bytes.large_pool.current"), static_cast<std::int64_t>(40 * MiB));
  // Splits with any remainder >= 512 bytes; inactive_split leaves expandable memory out.
  EXPECT_EQ(f.stat("inactive_split.all.current"), 0);
  f.alloc->deallocate(c);
  f.alloc->deallocate(b);
  f.alloc->deallocate(a);
  f.alloc->empty_cache();
  EXPECT_EQ(f.reserved(), 0u);
  EXPECT_EQ(f.device->used_bytes(), 0u);
  EXPECT_EQ(f.stat("num_device_free"), 2);
}

TEST(CachingAllocator, ExpandableSegmentsUnderALimit) {
  Fixture f("expandable_segments:True", 80 * GiB, "100MiB");
  DevPtr a = f.a(50 * MiB);  // 60 MiB mapped (3 pages of 20 MiB)
  EXPECT_EQ(f.reserved(), 60 * MiB);
  // The limit check uses the request's segment size (50 MiB), not the pages: 60 + 50 > 100.
  EXPECT_FALSE(f.alloc->allocate(50 * MiB, 0).has_value());
  f.alloc->deallocate(a);
  // After the free, the 60 MiB mapped block serves 50 MiB without mapping.
  EXPECT_EQ(f.a(50 * MiB), a);
  EXPECT_EQ(f.stat("num_ooms"), 1);
  EXPECT_EQ(f.reserved(), 60 * MiB);
}

TEST(CachingAllocator, FreeOfUnknownPointerThrows) {
  Fixture f;
  EXPECT_THROW(f.alloc->deallocate(0x1234000), std::invalid_argument);
  EXPECT_EQ(f.alloc->allocate(0, 0).value_or(1), 0u);
}

TEST(CachingAllocator, MemoryStatsKeysAndSummary) {
  Fixture f;
  f.a(3 * MiB);
  auto stats = f.alloc->memory_stats();
  std::map<std::string, std::int64_t> m(stats.begin(), stats.end());
  EXPECT_EQ(m.size(), 9u * 3 * 4 + 2 * 4 + 6);
  EXPECT_EQ(m.at("allocated_bytes.all.current"), static_cast<std::int64_t>(3 * MiB));
  EXPECT_EQ(m.at("active_bytes.large_pool.peak"), static_cast<std::int64_t>(3 * MiB));
  EXPECT_EQ(m.at("segment.all.allocated"), 1);
  EXPECT_EQ(m.at("max_split_size"), -1);
  EXPECT_TRUE(std::is_sorted(stats.begin(), stats.end()));
  std::string s = f.alloc->memory_summary();
  EXPECT_NE(s.find("PyTorch CUDA memory summary, device ID 0"), std::string::npos);
  EXPECT_NE(s.find("| Allocated memory      |   3072 KiB |   3072 KiB |   3072 KiB |      0 B   |"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("| GPU reserved segments |       1    |"), std::string::npos) << s;
}

// A block freed while another stream still uses it (record_stream): PyTorch's free() takes it out
// of allocation/allocated_bytes at once and returns the block to its pool only when the stream is
// done (its deallocate here). Until then it is neither reused nor merged, and it is no free space.
TEST(CachingAllocator, AFreeRequestDropsTheStatisticsAndKeepsTheBlockUntilItsFree) {
  Fixture f;
  const DevPtr a = f.a(8 * MiB);  // a 20 MiB segment: 8 MiB, and 12 MiB cached
  f.alloc->free_requested(a);
  EXPECT_EQ(f.allocated(), 0u);
  EXPECT_EQ(f.alloc->stats().requested_bytes, 0u);
  EXPECT_EQ(f.alloc->stats().frees, 1u);
  EXPECT_EQ(f.stat("allocation.all.current"), 0);
  EXPECT_EQ(f.stat("requested_bytes.all.current"), 8 * MiB) << "PyTorch's counts it until the block returns";
  f.alloc->free_requested(a);  // a second request changes nothing
  EXPECT_EQ(f.stat("allocation.all.freed"), 1);
  const DevPtr b = f.a(8 * MiB);
  EXPECT_EQ(b, a + 8 * MiB) << "the freed block is not handed out before its free";
  EXPECT_EQ(f.allocated(), 8 * MiB);
  EXPECT_EQ(f.stat("allocated_bytes.all.peak"), 8 * MiB);
  const std::optional<FreeSpace> fs = f.alloc->free_space();
  ASSERT_TRUE(fs.has_value());
  EXPECT_EQ(fs->free_bytes, 4 * MiB) << "20 MiB reserved: 8 allocated, 8 freed and not returned, 4 free";
  EXPECT_EQ(fs->largest_free_bytes, 4 * MiB);
  f.alloc->deallocate(a);  // the other stream is done: the block returns
  EXPECT_EQ(f.allocated(), 8 * MiB);
  EXPECT_EQ(f.stat("allocation.all.freed"), 1) << "counted once, at the request";
  EXPECT_EQ(f.stat("requested_bytes.all.current"), 8 * MiB);
  EXPECT_EQ(f.alloc->free_space()->free_bytes, 12 * MiB);
  EXPECT_EQ(f.a(8 * MiB), a) << "returned, it is the best fit again";
  EXPECT_EQ(f.reserved(), 20 * MiB);
  EXPECT_EQ(f.alloc->stats().device_allocs, 1u);
  // Active = allocated + freed and not returned: at b's allocation 16 MiB, 2 blocks. Only the
  // .all figures are kept (no per-pool ones), and memory_summary leaves its active rows out.
  EXPECT_EQ(f.stat("active_bytes.all.peak"), 16 * MiB);
  EXPECT_EQ(f.stat("active.all.peak"), 2);
  EXPECT_EQ(f.stat("active_bytes.all.current"), 16 * MiB);  // b and the last allocation
  EXPECT_EQ(f.stat("active.all.freed"), 1);
  for (const auto& [k, v] : f.alloc->memory_stats())
    EXPECT_EQ(k.find("active") == 0 && k.find("_pool") != std::string::npos, false) << k;
  EXPECT_EQ(f.alloc->memory_summary().find("Active memory"), std::string::npos);
}

// A request that fails while blocks wait on another stream: PyTorch waits for those streams
// (synchronize_and_free_events) before it frees its cache and tries again, so the block comes
// back early and the request is served; the caller learns which (take_returned_early) and makes
// no deallocate for it. empty_cache does the same.
TEST(CachingAllocator, ARetryTakesBackBlocksWaitingOnAnotherStreamAsPyTorchDoes) {
  Fixture f("", 24 * MiB);
  const DevPtr a = f.a(16 * MiB);  // one 16 MiB segment
  f.alloc->free_requested(a);
  EXPECT_TRUE(f.alloc->take_returned_early().empty());
  const DevPtr b = f.a(16 * MiB);  // no room beside it: the retry takes a back, frees its segment
  EXPECT_EQ(f.alloc->take_returned_early(), std::vector<DevPtr>{a});
  EXPECT_TRUE(f.alloc->take_returned_early().empty()) << "each is given once";
  EXPECT_EQ(f.allocated(), 16 * MiB);
  EXPECT_EQ(f.reserved(), 16 * MiB);
  EXPECT_EQ(f.stat("num_alloc_retries"), 1);
  EXPECT_EQ(f.stat("num_device_free"), 1);
  EXPECT_EQ(f.stat("num_device_alloc"), 2);
  EXPECT_EQ(f.stat("active.all.current"), 1);
  EXPECT_EQ(f.alloc->stats().ooms, 0u);
  f.alloc->free_requested(b);
  f.alloc->empty_cache();  // waits for b's stream too: b returns, and its segment with it
  EXPECT_EQ(f.alloc->take_returned_early(), std::vector<DevPtr>{b});
  EXPECT_EQ(f.reserved(), 0u);
  EXPECT_EQ(f.stat("active_bytes.all.current"), 0);
}

}  // namespace
}  // namespace gmb
