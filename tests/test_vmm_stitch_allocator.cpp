// vmm_stitch (GMLake's virtual memory stitching) on the simulated device: when it stitches and
// when it does not, the bytes it holds, the device calls it makes, its cache of stitched blocks,
// OOMs as results, its options, and the shipped fragmentation cases where `caching` runs out.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "allocators/registry.h"
#include "devices/device.h"
#include "devices/forwarding_device.h"
#include "harness/config/config.h"
#include "harness/run/runner.h"
#include "test_helpers.h"

using namespace gmb;

namespace {

std::int64_t stat(const InspectableAllocator& a, const std::string& key) {
  for (const auto& [k, v] : a.memory_stats())
    if (k == key) return v;
  ADD_FAILURE() << "no memory_stats key " << key;
  return -1;
}

struct Fixture {
  explicit Fixture(AllocatorOptions o = {}, Bytes capacity = 64 * MiB) {
    SimDeviceOptions d;
    d.capacity_bytes = capacity;
    device = make_sim_device(d);
    used_at_start = device->used_bytes();
    alloc = make_allocator("vmm_stitch", *device, o);
  }
  DevPtr get(Bytes b) {
    auto p = alloc->allocate(b, 0);
    EXPECT_TRUE(p.has_value()) << b;
    return p.value_or(0);
  }
  Bytes reserved() const { return alloc->stats().reserved_bytes; }
  const DeviceCounters& calls() const { return device->counters(); }
  std::unique_ptr<Device> device;
  Bytes used_at_start = 0;
  std::unique_ptr<InspectableAllocator> alloc;
};

// Two 4 MiB blocks in two segments, freed: two free runs of 2 chunks that no 8 MiB request fits.
void two_separate_free_runs(Fixture& f) {
  const DevPtr a = f.get(4 * MiB);
  const DevPtr b = f.get(4 * MiB);
  EXPECT_EQ(f.calls().address_reserves, 2u) << "no free chunk: each request is a new segment";
  EXPECT_EQ(f.calls().handle_creates, 4u) << "2 MiB chunks";
  f.alloc->deallocate(a);
  f.alloc->deallocate(b);
  EXPECT_EQ(stat(*f.alloc, "vmm.free_chunks"), 4);
}

TEST(VmmStitch, StitchesFreeChunksInsteadOfTakingMoreMemory) {
  Fixture f;
  two_separate_free_runs(f);
  const DeviceCounters before = f.calls();
  const DevPtr s = f.get(8 * MiB);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 1);
  EXPECT_EQ(f.calls().handle_creates, before.handle_creates) << "no new physical memory";
  EXPECT_EQ(f.calls().address_reserves, before.address_reserves + 1) << "one new virtual range";
  EXPECT_EQ(f.calls().handle_maps, before.handle_maps + 4) << "its 4 chunks mapped into it";
  EXPECT_EQ(f.reserved(), 8 * MiB);
  EXPECT_EQ(f.alloc->stats().allocated_bytes, 8 * MiB);
  EXPECT_EQ(f.device->used_bytes() - f.used_at_start, 8 * MiB);
  EXPECT_EQ(stat(*f.alloc, "vmm.free_chunks"), 0);

  // Freed, it stays mapped in the cache; the same request gets it back, without a device call.
  f.alloc->deallocate(s);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitched_blocks"), 1);
  const DeviceCounters cached = f.calls();
  EXPECT_EQ(f.get(8 * MiB), s);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitched_block_reuses"), 1);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 1);
  EXPECT_EQ(f.calls().handle_maps, cached.handle_maps);
  EXPECT_EQ(f.calls().address_reserves, cached.address_reserves);
  EXPECT_EQ(f.alloc->stats().cache_hits, 2u) << "the stitch and the reuse needed no new memory";
}

TEST(VmmStitch, AFittingFreeRunIsTakenBeforeAnyStitch) {
  Fixture f;
  two_separate_free_runs(f);
  const DevPtr a = f.get(4 * MiB);  // exactly one run
  const DevPtr b = f.get(3 * MiB);  // rounded to 4 MiB: the other
  EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 0);
  EXPECT_EQ(f.alloc->stats().allocated_bytes, 8 * MiB);
  EXPECT_EQ(f.alloc->stats().requested_bytes, 7 * MiB);
  f.alloc->deallocate(a);
  // A free run larger than the request is split: 2 MiB of the 4 MiB run, 2 MiB stay free.
  const DevPtr c = f.get(2 * MiB);
  EXPECT_EQ(c, a);
  EXPECT_EQ(stat(*f.alloc, "vmm.free_chunks"), 1);
  f.alloc->deallocate(b);
  f.alloc->deallocate(c);
  EXPECT_EQ(stat(*f.alloc, "vmm.free_chunks"), 4) << "runs merge back";
  EXPECT_EQ(f.calls().handle_creates, 4u);
}

TEST(VmmStitch, TakesOnlyTheChunksTheFreeOnesLack) {
  Fixture f;
  two_separate_free_runs(f);
  const DevPtr a = f.get(4 * MiB);  // one run used: 2 free chunks left
  const DeviceCounters before = f.calls();
  const DevPtr s = f.get(8 * MiB);  // 4 chunks: the 2 free ones and 2 new
  EXPECT_EQ(f.calls().handle_creates, before.handle_creates + 2);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 1);
  EXPECT_EQ(f.reserved(), 12 * MiB) << "8 MiB were held, 4 MiB more would have been 16";
  f.alloc->deallocate(a);
  f.alloc->deallocate(s);
  EXPECT_EQ(f.alloc->stats().allocated_bytes, 0u);
  EXPECT_EQ(stat(*f.alloc, "vmm.free_chunks"), 6);
}

TEST(VmmStitch, BelowFragmentLimitANewSegmentIsTakenInstead) {
  Fixture f(AllocatorOptions{{"fragment_limit", "16MiB"}});
  two_separate_free_runs(f);
  f.get(8 * MiB);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 0);
  EXPECT_EQ(f.calls().handle_creates, 8u) << "4 more chunks, the 4 free ones stay free";
  EXPECT_EQ(f.reserved(), 16 * MiB);
}

TEST(VmmStitch, ReuseLimitBoundsTheCachedBlocksARequestMayTake) {
  for (const char* limit : {"10", "1"}) {
    Fixture f(AllocatorOptions{{"reuse_limit", limit}});
    two_separate_free_runs(f);
    f.alloc->deallocate(f.get(8 * MiB));  // a cached sBlock of 4 chunks, all free
    const DevPtr p = f.get(6 * MiB);      // 3 chunks: no run of 3
    if (std::string(limit) == "10") {
      EXPECT_EQ(stat(*f.alloc, "vmm.stitched_block_reuses"), 1) << "4 <= 3 x 10";
      EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 1);
      EXPECT_EQ(stat(*f.alloc, "vmm.free_chunks"), 1) << "the sBlock's 4th chunk stays free";
    } else {
      EXPECT_EQ(stat(*f.alloc, "vmm.stitched_block_reuses"), 0) << "4 > 3 x 1";
      EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 2);
    }
    EXPECT_EQ(f.alloc->stats().allocated_bytes, 6 * MiB);
    f.alloc->deallocate(p);
  }
}

TEST(VmmStitch, ACachedBlockWithAChunkInUseIsNotReused) {
  Fixture f;
  two_separate_free_runs(f);
  const DevPtr s = f.get(8 * MiB);
  f.alloc->deallocate(s);
  const DevPtr a = f.get(4 * MiB);  // one run: two of the cached sBlock's chunks are in use
  const DevPtr t = f.get(8 * MiB);
  EXPECT_NE(t, s);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitched_block_reuses"), 0);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 2);
  f.alloc->deallocate(a);
  f.alloc->deallocate(t);
}

TEST(VmmStitch, StitchCacheLimitCollectsCachedBlocks) {
  Fixture f(AllocatorOptions{{"stitch_cache_limit", "0"}});
  two_separate_free_runs(f);
  const DevPtr s = f.get(8 * MiB);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitched_blocks"), 1) << "a live sBlock is never collected";
  const DeviceCounters before = f.calls();
  f.alloc->deallocate(s);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitched_blocks"), 0);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitched_blocks_collected"), 1);
  EXPECT_EQ(f.calls().handle_unmaps, before.handle_unmaps + 4);
  EXPECT_EQ(f.calls().address_frees, before.address_frees + 1);
  EXPECT_EQ(f.calls().handle_releases, before.handle_releases) << "the physical chunks stay";
  EXPECT_EQ(f.reserved(), 8 * MiB);
  f.get(8 * MiB);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 2) << "stitched again";
}

TEST(VmmStitch, SmallRequestsGoToTheCachingSmallPool) {
  Fixture f;
  const DevPtr p = f.get(512);
  EXPECT_EQ(f.calls().mallocs, 1u) << "one 2 MiB cudaMalloc segment, as PyTorch's small pool";
  EXPECT_EQ(f.calls().handle_creates, 0u);
  EXPECT_EQ(f.reserved(), 2 * MiB);
  EXPECT_EQ(f.alloc->stats().allocated_bytes, 512u);
  const DevPtr q = f.get(1 * MiB + 1);  // above the small pool: one chunk
  EXPECT_EQ(f.calls().handle_creates, 1u);
  EXPECT_EQ(f.reserved(), 4 * MiB);
  f.alloc->deallocate(p);
  f.alloc->deallocate(q);
  EXPECT_EQ(f.alloc->stats().frees, 2u);
}

TEST(VmmStitch, EverythingGoesBackToTheDevice) {
  Fixture f;
  two_separate_free_runs(f);
  const DevPtr s = f.get(8 * MiB);
  const DevPtr small = f.get(4096);
  f.alloc->deallocate(s);
  f.alloc->deallocate(small);
  f.alloc->empty_cache();
  EXPECT_EQ(f.reserved(), 0u);
  EXPECT_EQ(f.device->used_bytes(), f.used_at_start);
  const DeviceCounters& c = f.calls();
  EXPECT_EQ(c.handle_releases, c.handle_creates);
  EXPECT_EQ(c.handle_unmaps, c.handle_maps);
  EXPECT_EQ(c.address_frees, c.address_reserves);
  EXPECT_EQ(c.frees, c.mallocs);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitched_blocks"), 0);
  EXPECT_EQ(f.alloc->stats().peak_reserved_bytes, 8 * MiB + 2 * MiB);
}

TEST(VmmStitch, AnOomIsARecordedResultAndTheAllocatorGoesOn) {
  Fixture f({}, 16 * MiB);
  const DevPtr a = f.get(10 * MiB);
  const DevPtr b = f.get(4 * MiB);
  const DeviceCounters before = f.calls();
  EXPECT_FALSE(f.alloc->allocate(6 * MiB, 0).has_value()) << "2 MiB are left, 6 asked";
  EXPECT_EQ(f.alloc->stats().ooms, 1u);
  const OomDetails oom = f.alloc->last_oom();
  EXPECT_EQ(oom.requested_bytes, 6 * MiB);
  EXPECT_EQ(oom.reserved_bytes, 14 * MiB);
  EXPECT_EQ(oom.allocated_bytes, 14 * MiB);
  EXPECT_NE(oom.message.find("out of memory"), std::string::npos) << oom.message;
  EXPECT_EQ(f.reserved(), 14 * MiB) << "the chunk it got before the refusal went back";
  EXPECT_EQ(f.device->used_bytes() - f.used_at_start, 14 * MiB);
  EXPECT_EQ(f.calls().handle_releases - before.handle_releases, f.calls().handle_creates - before.handle_creates - 1)
      << "every chunk created for the failed request but the refused one was released";
  // Sizes near 2^64 are refused before any rounding.
  for (Bytes huge : {UINT64_MAX, UINT64_MAX - 1 * MiB + 2, Bytes{1} << 63}) {
    EXPECT_FALSE(f.alloc->allocate(huge, 0).has_value());
    EXPECT_EQ(f.alloc->last_oom().requested_bytes, huge);
    EXPECT_NE(f.alloc->last_oom().message.find("larger than the whole device"), std::string::npos);
  }
  EXPECT_EQ(f.alloc->stats().ooms, 4u);
  // Freed memory serves the request that failed, stitched from the two freed blocks.
  f.alloc->deallocate(b);
  const DevPtr c = f.get(6 * MiB);
  EXPECT_EQ(stat(*f.alloc, "vmm.stitches"), 1);
  f.alloc->deallocate(a);
  f.alloc->deallocate(c);
  EXPECT_EQ(f.alloc->stats().allocated_bytes, 0u);
}

TEST(VmmStitch, OptionsAreCheckedWithClearErrors) {
  auto error_of = [](const AllocatorOptions& o) -> std::pair<std::string, std::string> {
    try {
      validate_allocator_options("vmm_stitch", o);
    } catch (const OptionError& e) {
      return {e.key, e.what()};
    }
    return {"", ""};
  };
  EXPECT_EQ(error_of({{"granularity", "3MiB"}}).first, "granularity");
  EXPECT_NE(error_of({{"granularity", "3MiB"}}).second.find("multiple of 2 MiB"), std::string::npos);
  EXPECT_EQ(error_of({{"granularity", "0"}}).first, "granularity");
  EXPECT_EQ(error_of({{"granularity", "2GiB"}}).first, "granularity");
  EXPECT_EQ(error_of({{"granularity", "lots"}}).first, "granularity");
  EXPECT_EQ(error_of({{"reuse_limit", "0.5"}}).first, "reuse_limit");
  EXPECT_EQ(error_of({{"reuse_limit", "ten"}}).first, "reuse_limit");
  EXPECT_EQ(error_of({{"reuse_limit", "nan"}}).first, "reuse_limit");
  EXPECT_EQ(error_of({{"fragment_limit", "-1"}}).first, "fragment_limit");
  EXPECT_EQ(error_of({{"stitch_cache_limit", "x"}}).first, "stitch_cache_limit");
  EXPECT_EQ(error_of({{"stitch", "1"}}).first, "stitch");
  EXPECT_EQ(error_of({{"granularity", "4MiB"}, {"reuse_limit", "2.5"}, {"fragment_limit", "512MiB"},
                      {"stitch_cache_limit", "0"}}).first, "");
  // A granularity the device cannot map: named when the allocator is made.
  SimDeviceOptions d;
  d.page_bytes = 4 * MiB;
  auto dev = make_sim_device(d);
  try {
    make_allocator("vmm_stitch", *dev, {{"granularity", "2MiB"}});
    ADD_FAILURE() << "a 2 MiB chunk on a 4 MiB-granularity device";
  } catch (const OptionError& e) {
    EXPECT_EQ(e.key, "granularity");
    EXPECT_NE(std::string(e.what()).find("4.0 MiB"), std::string::npos) << e.what();
  }
}

TEST(VmmStitch, LargerGranularityRoundsToItsChunks) {
  Fixture f(AllocatorOptions{{"granularity", "8MiB"}});
  f.get(9 * MiB);
  EXPECT_EQ(f.reserved(), 16 * MiB);
  EXPECT_EQ(f.calls().handle_creates, 2u);
}

// A device that shows the reserved ranges of another at other addresses, ascending where the
// simulated driver's descend (the H200 places them its own way too).
class ElsewhereDevice final : public ForwardingDevice {
 public:
  using ForwardingDevice::ForwardingDevice;

 private:
  std::optional<DevPtr> do_reserve_address_range(Bytes bytes) override {
    auto real = inner().reserve_address_range(bytes);
    if (!real) return real;
    const DevPtr fake = next_;
    next_ += bytes + 64 * MiB;
    ranges_[fake] = {*real, bytes};
    return fake;
  }
  void do_release_address_range(DevPtr base, Bytes bytes) override {
    inner().release_address_range(ranges_.at(base).first, bytes);
    ranges_.erase(base);
  }
  void do_map_physical(DevPtr addr, PhysicalHandle h) override { inner().map_physical(real(addr), h); }
  void do_unmap_physical(DevPtr addr, Bytes bytes) override { inner().unmap_physical(real(addr), bytes); }
  DevPtr real(DevPtr fake) const {
    auto it = std::prev(ranges_.upper_bound(fake));
    return it->second.first + (fake - it->first);
  }
  DevPtr next_ = 0x100000000000ULL;
  std::map<DevPtr, std::pair<DevPtr, Bytes>> ranges_;  // fake base -> (real base, bytes)
};

// What a seeded mix of large requests (a third of the events frees) decides after every event.
std::vector<std::vector<std::int64_t>> decisions(Device& device) {
  auto a = make_allocator("vmm_stitch", device, {});
  std::mt19937_64 rng(15);
  std::vector<DevPtr> live;
  std::vector<std::vector<std::int64_t>> out;
  for (int i = 0; i < 600; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t k = rng() % live.size();
      a->deallocate(live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else if (auto p = a->allocate(1 * MiB + 1 + rng() % (96 * MiB), 0)) {
      live.push_back(*p);
    }
    out.push_back({static_cast<std::int64_t>(a->stats().reserved_bytes), stat(*a, "vmm.stitches"),
                   stat(*a, "vmm.stitched_block_reuses"), stat(*a, "vmm.free_chunks"),
                   static_cast<std::int64_t>(a->stats().ooms)});
  }
  return out;
}

TEST(VmmStitch, DecisionsDoNotDependOnWhereTheDriverPutsTheRanges) {
  SimDeviceOptions o;
  o.capacity_bytes = 2 * GiB;
  auto plain = make_sim_device(o);
  auto inner = make_sim_device(o);
  ElsewhereDevice elsewhere(*inner);
  const auto a = decisions(*plain), b = decisions(elsewhere);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "event " << i;
  EXPECT_GT(a.back()[1], 10) << "the mix stitches";
  EXPECT_GT(a.back()[2], 10) << "the mix reuses stitched blocks";
  EXPECT_GT(a.back()[4], 0) << "the mix reaches OOMs";
}

// A device whose address space runs out after `ranges` reservations.
class FewRangesDevice final : public ForwardingDevice {
 public:
  FewRangesDevice(Device& inner, int ranges) : ForwardingDevice(inner), left_(ranges) {}

 private:
  std::optional<DevPtr> do_reserve_address_range(Bytes bytes) override {
    if (left_ == 0) return std::nullopt;
    auto p = inner().reserve_address_range(bytes);
    if (p) --left_;
    return p;
  }
  void do_release_address_range(DevPtr base, Bytes bytes) override {
    inner().release_address_range(base, bytes);
    ++left_;
  }
  int left_;
};

TEST(VmmStitch, NoAddressSpaceToStitchIntoIsARecordedOom) {
  SimDeviceOptions o;
  o.capacity_bytes = 64 * MiB;
  auto sim = make_sim_device(o);
  FewRangesDevice device(*sim, 3);
  auto a = make_allocator("vmm_stitch", device, {});
  const auto x = a->allocate(4 * MiB, 0), y = a->allocate(4 * MiB, 0);
  ASSERT_TRUE(x && y);
  a->deallocate(*x);
  const auto s = a->allocate(6 * MiB, 0);  // 2 free chunks: 1 new segment (the 3rd range), stitched
  EXPECT_FALSE(s.has_value()) << "no 4th range to stitch into";
  EXPECT_EQ(a->stats().ooms, 1u);
  EXPECT_NE(a->last_oom().message.find("virtual address space"), std::string::npos) << a->last_oom().message;
  EXPECT_EQ(stat(*a, "vmm.free_chunks"), 3) << "nothing taken: the free chunks and the new one stay free";
  a->deallocate(*y);
  EXPECT_EQ(a->allocate(10 * MiB, 0).has_value(), false) << "still no range";
  const auto z = a->allocate(4 * MiB, 0);  // a free run: no range needed
  ASSERT_TRUE(z.has_value());
  a->deallocate(*z);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
  EXPECT_EQ(sim->used_bytes(), 0u);
}

// The shipped cases where PyTorch's allocator runs out: configs/fragmentation_oom.yaml at 1.75 GiB
// and configs/dynamic_seq.yaml at 24 GiB (300 steps). vmm_stitch runs both to the end.
CaseResult run_shipped(const std::string& config_name, const std::string& allocator, Bytes capacity) {
  const Config config = load_config(gmb::testing::source_path("configs/" + config_name));
  RunSettings settings;
  settings.on_oom = OnOom::Continue;
  return run_case(CaseSpec{allocator, {}, config.workloads.at(0).make}, DeviceSpec{DeviceChoice::Sim, capacity},
                  settings);
}

TEST(VmmStitch, SurvivesTheFragmentationOomThatStopsCaching) {
  const CaseResult caching = run_shipped("fragmentation_oom.yaml", "caching", 1792 * MiB);
  const CaseResult stitch = run_shipped("fragmentation_oom.yaml", "vmm_stitch", 1792 * MiB);
  ASSERT_EQ(caching.runs.size(), 1u) << caching.error;
  ASSERT_EQ(stitch.runs.size(), 1u) << stitch.error;
  EXPECT_EQ(caching.runs[0].fragmentation_ooms, 3u);
  EXPECT_EQ(stitch.runs[0].ooms, 0u);
  EXPECT_EQ(stitch.runs[0].steps_completed, 3u);
  // 8 x 200 MiB live at once is the most it ever holds: the 300 MiB requests are stitched from
  // the holes the 110 MiB blocks leave.
  EXPECT_EQ(stitch.runs[0].peak_reserved_bytes, 1600 * MiB);
  std::int64_t stitches = 0;
  for (const auto& [k, v] : stitch.memory_stats)
    if (k == "vmm.stitches") stitches = v;
  EXPECT_GT(stitches, 0);
}

TEST(VmmStitch, SurvivesTheDynamicSequenceOomThatStopsCaching) {
  const CaseResult caching = run_shipped("dynamic_seq.yaml", "caching", 24 * GiB);
  const CaseResult stitch = run_shipped("dynamic_seq.yaml", "vmm_stitch", 24 * GiB);
  ASSERT_EQ(caching.runs.size(), 1u) << caching.error;
  ASSERT_EQ(stitch.runs.size(), 1u) << stitch.error;
  EXPECT_GT(caching.runs[0].fragmentation_ooms, 0u);
  EXPECT_EQ(stitch.runs[0].ooms, 0u);
  EXPECT_EQ(stitch.runs[0].steps_completed, 300u);
  EXPECT_LE(stitch.runs[0].peak_reserved_bytes, 24 * GiB);
}

}  // namespace
