// Requests near 2^64 bytes: every allocator records a capacity OOM for a request larger than
// any card (no size arithmetic wraps around), and the replay goes on with the right figures.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

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

// A device larger than 1 PiB is refused up front (exit 2, the limit named), on the command
// line and in a config, rather than failing (or wrapping) in the middle of a run.
TEST(HugeSizes, CapacityAboveOnePiBIsAUsageError) {
  auto dir = temp_dir("hugecap");
  write_text(dir / "t.csv", "action,id,bytes,stream\nalloc,0,1048576,0\n");
  auto r = run_gpumembench("replay --device sim --quiet --trace " + (dir / "t.csv").string() +
                           " --allocator caching --capacity 1025TiB");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--capacity: 1025TiB is larger than 1024TiB"), std::string::npos) << r.out;
  r = run_gpumembench("replay --device sim --quiet --trace " + (dir / "t.csv").string() +
                      " --allocator caching --capacity 1024TiB --output " + (dir / "ok").string());
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
