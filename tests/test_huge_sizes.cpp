// Requests near 2^64 bytes: every allocator records a capacity OOM for a request larger than
// any card (no size arithmetic wraps around), and the replay goes on with the right figures.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "allocators/registry.h"
#include "devices/device.h"
#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace gmb::testing;

namespace {

struct Setting {
  std::string allocator, alloc_conf;
};

const std::vector<Setting> kSettings = {
    {"caching", ""},
    {"caching", "expandable_segments:True"},
    {"caching", "roundup_power2_divisions:4"},
    {"cuda_malloc", ""},
    {"cuda_managed", ""},
    {"cuda_mempool", ""},
};

// Runs the config text `yaml` (written to dir/NAME.yaml) on sim with CSV output into dir/NAME/:
// the command's result and the rows of its results.csv (none where it wrote none).
struct ConfigRun {
  CommandResult command;
  std::map<std::string, std::map<std::string, std::string>> rows;
};
ConfigRun run_config_on_sim(const fs::path& dir, const std::string& name, const std::string& yaml) {
  const fs::path config = dir / (name + ".yaml"), out = dir / name;
  write_text(config, yaml);
  ConfigRun run{run_gpumembench("--device sim --quiet --format csv --config " + config.string() + " --output " +
                                out.string()),
                {}};
  if (fs::exists(out / "results.csv")) run.rows = parse_csv(read_text(out / "results.csv"));
  return run;
}

// Replays `alloc,0,HUGE,0` then a 1 MiB alloc under every allocator setting.
void expect_capacity_oom_then_1mib(const std::string& huge, const std::string& need) {
  auto dir = temp_dir("huge");
  write_text(dir / "t.csv", "action,id,bytes,stream\nalloc,0," + huge + ",0\nalloc,1,1048576,0\n");
  for (const Setting& s : kSettings) {
    SCOPED_TRACE(s.allocator + " " + s.alloc_conf + " request " + huge);
    auto out = dir / (s.allocator + std::to_string(s.alloc_conf.size()));
    std::string conf = s.alloc_conf.empty() ? "" : " --alloc-conf " + s.alloc_conf;
    auto r = run_gpumembench("replay --device sim --capacity 8GiB --quiet --format csv --trace " +
                             (dir / "t.csv").string() + " --allocator " + s.allocator + conf +
                             " --output " + out.string());
    ASSERT_EQ(r.status, 0) << r.out;
    auto rows = parse_csv(read_text(out / "results.csv"));
    ASSERT_EQ(rows.size(), 1u);
    const auto& row = rows.begin()->second;
    EXPECT_EQ(row.at("ooms"), "1");
    EXPECT_EQ(row.at("capacity_ooms"), "1");
    EXPECT_EQ(row.at("oom_kind"), "capacity");
    EXPECT_EQ(row.at("oom_event"), "0");
    EXPECT_EQ(row.at("oom_requested_bytes"), huge);
    EXPECT_EQ(row.at("peak_allocated_bytes"), "1048576");
    EXPECT_EQ(row.at("error"), "");
    // What the trace needs: saturated at 2^64 - 1 rather than wrapped to a small number.
    EXPECT_EQ(row.at("need_peak_requested_bytes"), need);
    EXPECT_EQ(row.at("need_peak_rounded_bytes"), need);
  }
  fs::remove_all(dir);
}

}  // namespace

TEST(HugeSizes, TwoToThe64MinusOneIsACapacityOomOnEveryAllocator) {
  expect_capacity_oom_then_1mib("18446744073709551615", "18446744073709551615");
}

TEST(HugeSizes, TwoToThe63IsACapacityOomOnEveryAllocator) {
  expect_capacity_oom_then_1mib("9223372036854775808", "9223372036855824384");
}

// The need's rounding at the top of the range, as torch's round_size: a request above 2^64 - 1 -
// 512 rounds to 2^64 - 1 (even 2^64 - 512, a multiple of 512), one below it to the next multiple.
TEST(HugeSizes, TheNeedRoundsRequestsNearTwoToThe64AsTorchDoes) {
  auto dir = temp_dir("huge_round");
  const std::pair<const char*, const char*> cases[] = {
      {"18446744073709551104", "18446744073709551615"},  // 2^64 - 512
      {"18446744073709551103", "18446744073709551104"},  // 2^64 - 513
      {"18446744073709550593", "18446744073709551104"},  // 2^64 - 1023
  };
  for (const auto& [bytes, rounded] : cases) {
    SCOPED_TRACE(bytes);
    write_text(dir / "t.csv", std::string("action,id,bytes,stream\nalloc,0,") + bytes + ",0\nfree,0,,0\n");
    auto r = run_gpumembench("replay --device sim --capacity 8GiB --quiet --format csv --trace " +
                             (dir / "t.csv").string() + " --allocator caching --overwrite --output " + (dir / "out").string());
    ASSERT_EQ(r.status, 0) << r.out;
    auto rows = parse_csv(read_text(dir / "out" / "results.csv"));
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows.begin()->second.at("need_peak_requested_bytes"), bytes);
    EXPECT_EQ(rows.begin()->second.at("need_peak_rounded_bytes"), rounded);
  }
  fs::remove_all(dir);
}

// A device larger than 1 PiB is refused up front (exit 2, the limit named), on the command
// line and in a config, rather than failing (or wrapping) in the middle of a run.
TEST(HugeSizes, CapacityAboveOnePiBIsAUsageError) {
  auto dir = temp_dir("hugecap");
  write_text(dir / "t.csv", "action,id,bytes,stream\nalloc,0,1048576,0\n");
  auto with_capacity = [&](const std::string& capacity) {
    return run_gpumembench("replay --device sim --quiet --trace " + (dir / "t.csv").string() +
                           " --allocator caching --capacity " + capacity);
  };
  auto r = with_capacity("1025TiB");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--capacity: 1025TiB is larger than 1024TiB"), std::string::npos) << r.out;
  // No memory at all, or no size: each said so, with the range and the units.
  r = with_capacity("0");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--capacity: 0 is no memory at all (valid: 1 B to 1024TiB)"), std::string::npos) << r.out;
  r = with_capacity("1PiB");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--capacity: '1PiB' is not a size (valid: a byte count, or a number with B, KiB, MiB, GiB, "
                       "TiB, KB, MB, GB or TB, from 1 B to 1024TiB"),
            std::string::npos)
      << r.out;
  r = with_capacity("1024TiB --output " + (dir / "ok").string());
  EXPECT_EQ(r.status, 0) << r.out;

  write_text(dir / "c.yaml",
             "device: {capacity: [8GiB, 18446744073709551615]}\nallocators: [caching]\nworkloads: [hole_pattern]\n");
  r = run_gpumembench("--device sim --quiet --config " + (dir / "c.yaml").string() + " --output " +
                      (dir / "out").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("c.yaml:1:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device.capacity[1]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("larger than 1024TiB"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}

// The largest device accepted is a device the cases run on: allocations far larger than the
// H200's 79 TiB of modeled address space are placed above it (cudaMalloc, caching, bfc), and the
// caching allocator's free blocks stay in best-fit order above 256 TiB. Expandable segments
// run at exactly 1024 TiB (no room above the limit there, rather than a capacity refused).
TEST(HugeSizes, TheLargestDeviceRunsItsCases) {
  auto dir = temp_dir("largest");
  // 300 TiB and 260 TiB live, the 300 TiB one freed: the 280 TiB probe takes it.
  const ConfigRun run = run_config_on_sim(
      dir, "c",
      "device: {capacity: 1024TiB}\n"
      "allocators: [cuda_malloc, caching, bfc]\n"
      "workloads: [{hole_pattern: {sizes: [300TiB, 260TiB, 1GiB], free: [0], probe: 280TiB}}]\n");
  ASSERT_EQ(run.command.status, 0) << run.command.out;
  const auto& rows = run.rows;
  ASSERT_EQ(rows.size(), 3u);
  int cachings = 0;
  for (const auto& [label, row] : rows) {
    SCOPED_TRACE(label);
    EXPECT_EQ(row.at("ooms"), "0");
    EXPECT_EQ(row.at("error"), "");
    if (row.at("allocator_label") != "caching") continue;
    // The probe reuses the freed 300 TiB block (a fourth segment would make 840 TiB).
    EXPECT_EQ(row.at("peak_reserved_bytes"), std::to_string((560ULL << 40) + (1ULL << 30)));
    EXPECT_EQ(row.at("device_mallocs"), "3");
    ++cachings;
  }
  EXPECT_EQ(cachings, 1);

  const ConfigRun expandable = run_config_on_sim(
      dir, "e",
      "device: {capacity: 1024TiB}\n"
      "allocators: [{caching: {alloc_conf: 'expandable_segments:True'}}]\n"
      "workloads: [{hole_pattern: {sizes: [100MiB, 200MiB], free: [0], probe: 250MiB}}]\n");
  EXPECT_EQ(expandable.command.status, 0) << expandable.command.out;
  fs::remove_all(dir);
}

// Best fit among free blocks of more than 2^48 bytes (whose sizes a 48-bit key field held in
// bytes could not tell apart): the smaller one, though the larger lies at the lower address.
TEST(HugeSizes, CachingTakesTheBestFitAmongFreeBlocksAbove256TiB) {
  gmb::SimDeviceOptions o;
  o.capacity_bytes = gmb::kMaxDeviceBytes;
  auto d = gmb::make_sim_device(o);
  auto a = gmb::make_allocator("caching", *d, {});
  const gmb::Bytes tib = gmb::Bytes{1} << 40;
  // 300 and 302 TiB share a size bin of the free set (4 TiB wide there): their order inside it
  // is the key's.
  auto small = a->allocate(300 * tib, 0);  // placed top-down: the higher address
  auto pin1 = a->allocate(1 * gmb::GiB, 0);
  auto large = a->allocate(302 * tib, 0);
  auto pin2 = a->allocate(1 * gmb::GiB, 0);
  ASSERT_TRUE(small && pin1 && large && pin2);
  ASSERT_LT(*large, *small);
  a->deallocate(*small);
  a->deallocate(*large);
  auto p = a->allocate(299 * tib, 0);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, *small);
  auto q = a->allocate(301 * tib, 0);  // then the 302 TiB block: no new segment
  ASSERT_TRUE(q);
  EXPECT_EQ(*q, *large);
  EXPECT_EQ(a->stats().device_allocs, 4u);
}

// vmm_stitch keeps every physical chunk: 5 TiB at 2 MiB would be 2.6 M chunks (gigabytes of
// host memory, and at larger devices the host's memory killer). Past 2^21 live chunks the case
// is an error naming the limit, at once; a larger granularity runs the same request.
TEST(HugeSizes, VmmStitchRefusesMoreChunksThanItsModelKeeps) {
  auto dir = temp_dir("stitch_chunks");
  const ConfigRun run = run_config_on_sim(dir, "c",
                                          "device: {capacity: 8TiB}\n"
                                          "allocators: [vmm_stitch, {vmm_stitch: {granularity: 1GiB}}]\n"
                                          "workloads: [{hole_pattern: {sizes: [5TiB, 1GiB], free: [], probe: 1GiB}}]\n");
  EXPECT_EQ(run.command.status, 1) << run.command.out;  // a case failed; the sweep went on
  ASSERT_EQ(run.rows.size(), 2u);
  for (const auto& [label, row] : run.rows) {
    SCOPED_TRACE(label);
    if (row.at("allocator_label") == "vmm_stitch") {
      EXPECT_EQ(row.at("error"),
                "vmm_stitch's model keeps each physical chunk: at most 2097152 live chunks (4096.00 GiB at the "
                "granularity of 2.0 MiB), and this request needs 2621440 more; a larger granularity option covers "
                "more memory");
    } else {
      EXPECT_EQ(row.at("error"), "");
      EXPECT_EQ(row.at("ooms"), "0");
      EXPECT_EQ(row.at("peak_reserved_bytes"), std::to_string((5ULL << 40) + (2ULL << 30)));
    }
  }
  fs::remove_all(dir);
}

// On a device that could not hold the request anyway, a request past vmm_stitch's chunk limit is
// the OOM it always was (a frontier's capacity search goes on bisecting), not a case error.
TEST(HugeSizes, VmmStitchPastItsChunkLimitOnASmallerDeviceIsAnOom) {
  auto dir = temp_dir("stitch_oom");
  const ConfigRun run = run_config_on_sim(dir, "c",
                                          "device: {capacity: 3TiB}\n"
                                          "allocators: [vmm_stitch]\n"
                                          "workloads: [{hole_pattern: {sizes: [2TiB, 2560GiB], free: [], probe: 1GiB}}]\n");
  EXPECT_EQ(run.command.status, 0) << run.command.out;
  ASSERT_EQ(run.rows.size(), 1u);
  EXPECT_EQ(run.rows.begin()->second.at("error"), "");
  EXPECT_NE(run.rows.begin()->second.at("ooms"), "0");
  fs::remove_all(dir);
}

// The simulated driver itself refuses what it cannot hold before rounding it (cudaMalloc,
// cudaMallocManaged, cudaMallocAsync, cuMemMap), with nothing taken.
TEST(HugeSizes, SimulatedDriverRefusesBeforeRounding) {
  gmb::SimDeviceOptions o;
  o.capacity_bytes = 8 * gmb::GiB;
  auto d = gmb::make_sim_device(o);
  const gmb::Bytes used = d->used_bytes();
  for (gmb::Bytes huge : {UINT64_MAX, UINT64_MAX - 511, gmb::Bytes{1} << 63, 8 * gmb::GiB + 1}) {
    SCOPED_TRACE(huge);
    EXPECT_FALSE(d->malloc(huge));
    EXPECT_FALSE(d->malloc_managed(huge));
    auto pool = d->create_pool({});
    EXPECT_FALSE(d->malloc_async(pool, huge, 0));
    d->destroy_pool(pool);
    EXPECT_FALSE(d->map(d->vmm_granularity() * 1024, huge));
    EXPECT_EQ(d->used_bytes(), used);
  }
  auto p = d->malloc(1 * gmb::MiB + 1);
  EXPECT_TRUE(p);
  o.capacity_bytes = gmb::kMaxDeviceBytes + 1;
  EXPECT_THROW(gmb::make_sim_device(o), gmb::DeviceError);
}
