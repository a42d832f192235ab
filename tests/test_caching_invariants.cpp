// Random allocation sequences under every option combination: after every event the
// allocator's statistics must agree with its segment map and with the device.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "allocators/caching/caching_allocator.h"
#include "devices/device.h"

namespace gmb {
namespace {

std::map<std::string, std::int64_t> stats_of(const AllocatorInspection& a) {
  std::map<std::string, std::int64_t> m;
  for (const auto& [k, v] : a.memory_stats()) m[k] = v;
  return m;
}

void check(const AllocatorInspection& a, const Device& d, bool expandable, const std::string& where) {
  auto m = stats_of(a);
  Bytes seg_bytes = 0, used = 0, split_free = 0;
  std::int64_t split_free_n = 0, allocated_n = 0;
  for (const auto& s : a.segments()) {
    seg_bytes += s.size;
    Bytes sum = 0, expect_offset = 0;
    for (const auto& b : s.blocks) {
      ASSERT_EQ(b.offset, expect_offset) << where << ": blocks must tile the segment";
      expect_offset += b.size;
      sum += b.size;
      ASSERT_EQ(b.size % 512, 0u) << where;
      if (b.allocated) {
        used += b.size;
        ++allocated_n;
      } else if (s.blocks.size() > 1) {
        split_free += b.size;
        ++split_free_n;
      }
    }
    ASSERT_EQ(sum, s.size) << where;
    if (!expandable) {  // neighbouring free blocks are always merged
      for (std::size_t i = 1; i < s.blocks.size(); ++i)
        ASSERT_FALSE(!s.blocks[i].allocated && !s.blocks[i - 1].allocated) << where;
    }
  }
  ASSERT_EQ(static_cast<std::int64_t>(seg_bytes), m["reserved_bytes.all.current"]) << where;
  ASSERT_EQ(d.used_bytes(), seg_bytes) << where << ": the device holds what the allocator reserved";
  ASSERT_EQ(static_cast<std::int64_t>(used), m["allocated_bytes.all.current"]) << where;
  ASSERT_EQ(allocated_n, m["allocation.all.current"]) << where;
  ASSERT_EQ(m["active_bytes.all.current"], m["allocated_bytes.all.current"]) << where;
  ASSERT_EQ(m["reserved_bytes.all.current"],
            m["reserved_bytes.small_pool.current"] + m["reserved_bytes.large_pool.current"])
      << where;
  ASSERT_LE(m["reserved_bytes.all.current"], m["reserved_bytes.all.peak"]) << where;
  if (!expandable) {
    ASSERT_EQ(static_cast<std::int64_t>(split_free), m["inactive_split_bytes.all.current"]) << where;
    ASSERT_EQ(split_free_n, m["inactive_split.all.current"]) << where;
    ASSERT_EQ(static_cast<std::int64_t>(a.segments().size()), m["segment.all.current"]) << where;
  } else {
    ASSERT_EQ(m["inactive_split_bytes.all.current"], 0) << where;
  }
}

void run(const std::string& conf, const std::string& limit, std::uint32_t seed, int events) {
  SCOPED_TRACE("alloc_conf \"" + conf + "\" limit " + limit + " seed " + std::to_string(seed));
  SimDeviceOptions o;
  o.capacity_bytes = 16 * GiB;
  auto device = make_sim_device(o);
  AllocatorOptions opts;
  if (!conf.empty()) opts["alloc_conf"] = conf;
  if (!limit.empty()) opts["memory_limit_bytes"] = limit;
  auto a = make_caching_allocator(*device, opts);
  const bool es = conf.find("expandable_segments:True") != std::string::npos;
  std::mt19937_64 rng(seed);
  std::vector<std::pair<DevPtr, Bytes>> live;
  std::int64_t ooms = 0;
  for (int e = 0; e < events; ++e) {
    int what = static_cast<int>(rng() % 100);
    if (what < 52 || live.empty()) {
      Bytes bytes;
      int cls = static_cast<int>(rng() % 10);
      if (cls < 5) bytes = 1 + rng() % (1 << 20);                 // small pool
      else if (cls < 8) bytes = (1 << 20) + rng() % (20 << 20);   // 1..21 MiB
      else if (cls < 9) bytes = (20 << 20) + rng() % (300 << 20);
      else bytes = (256 << 20) + rng() % (1ull << 30);
      StreamId stream = static_cast<StreamId>(rng() % 4 == 0 ? 1 : 0);
      auto p = a->allocate(bytes, stream);
      if (p) {
        live.emplace_back(*p, bytes);
      } else {
        ++ooms;
        OomDetails d = a->last_oom();
        ASSERT_EQ(d.requested_bytes, bytes);
        ASSERT_TRUE(d.retried_after_freeing_cache);
      }
    } else if (what < 99) {
      std::size_t i = rng() % live.size();
      a->deallocate(live[i].first);
      live[i] = live.back();
      live.pop_back();
    } else {
      a->empty_cache();
    }
    check(*a, *device, es, "event " + std::to_string(e));
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(stats_of(*a)["num_ooms"], ooms);
  if (!limit.empty()) {
    EXPECT_GT(ooms, 10) << "the limit should bite";
    EXPECT_GE(stats_of(*a)["num_alloc_retries"], ooms) << "every OOM comes after a retry";
  }
  for (auto& [p, b] : live) a->deallocate(p);
  a->empty_cache();
  check(*a, *device, es, "end");
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
  EXPECT_EQ(device->used_bytes(), 0u);
}

TEST(CachingInvariants, RandomTracesAllOptions) {
  const std::vector<std::string> confs = {
      "",
      "max_split_size_mb:40",
      "max_split_size_mb:64,max_non_split_rounding_mb:128",
      "roundup_power2_divisions:4",
      "roundup_power2_divisions:[64:8,256:2,>:1]",
      "garbage_collection_threshold:0.5",
      "garbage_collection_threshold:0.7,max_split_size_mb:100",
      "expandable_segments:True",
      "expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:2",
  };
  std::uint32_t seed = 1;
  for (const auto& conf : confs) {
    run(conf, "", seed++, 1500);
    run(conf, "3GiB", seed++, 1500);  // OOM again and again
  }
}

TEST(CachingInvariants, DestroyingTheAllocatorReturnsEverything) {
  for (const char* conf : {"", "expandable_segments:True"}) {
    SimDeviceOptions o;
    o.capacity_bytes = 8 * GiB;
    auto device = make_sim_device(o);
    {
      auto a = make_caching_allocator(*device, {{"alloc_conf", conf}});
      for (int i = 0; i < 50; ++i) a->allocate(static_cast<Bytes>(i) * 3 * MiB + 100, i % 2);
      EXPECT_GT(device->used_bytes(), 0u);
    }
    EXPECT_EQ(device->used_bytes(), 0u) << conf;
  }
}

}  // namespace
}  // namespace gmb
