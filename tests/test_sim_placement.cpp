// The simulated device against the H200: replays what scripts/probe/driver_probe.cu did on the
// GPU (results/h200/probe/driver_probe.json) through the sim and compares, event by event,
// pointers relative to the first pointer of the pass (the address order and every offset),
// the physical memory each call took (cudaMemGetInfo deltas) and the pool's own statistics.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "devices/device.h"

using namespace gmb;
using nlohmann::json;

namespace {

const json& probe() {
  static const json j = [] {
    std::ifstream in(std::string(GMB_SOURCE_DIR) + "/results/h200/probe/driver_probe.json");
    json out;
    if (in) in >> out;
    return out;
  }();
  return j;
}

#define REQUIRE_PROBE(section)                                             \
  if (!probe().contains(section) || probe()[section].contains("error"))    \
  GTEST_FAIL() << "results/h200/probe/driver_probe.json has no " section " section"

std::unique_ptr<Device> h200_sim() {
  SimDeviceOptions o;
  o.capacity_bytes = 139 * GiB;  // the H200's free memory, rounded down
  return make_sim_device(o);
}

std::uint64_t hex(const json& v) { return std::stoull(v.get<std::string>(), nullptr, 16); }
std::int64_t signed_diff(std::uint64_t a, std::uint64_t b) { return static_cast<std::int64_t>(a - b); }

}  // namespace

// Every cudaMalloc of the probe's placement sequences (three passes: right after context
// creation, the same again, and with 2 MiB + 20 MiB + 1 GiB resident), replayed in order on
// one sim per pass: the sim's pointer minus the pass's first pointer must equal the H200's,
// and each call must take the same physical memory.
TEST(SimPlacement, ReplaysTheProbesCudaMallocSequencesWithTheH200sOffsets) {
  REQUIRE_PROBE("placement");
  std::size_t allocs = 0, mismatched = 0;
  std::string first_mismatch;
  for (const json& pass : probe()["placement"]["passes"]) {
    auto d = h200_sim();
    std::optional<std::uint64_t> gpu_anchor, sim_anchor;
    auto check = [&](const std::string& where, std::uint64_t gpu, std::uint64_t sim) {
      if (!gpu_anchor) {
        gpu_anchor = gpu;
        sim_anchor = sim;
      }
      ++allocs;
      if (signed_diff(gpu, *gpu_anchor) != signed_diff(sim, *sim_anchor)) {
        ++mismatched;
        if (first_mismatch.empty())
          first_mismatch = fmt::format("{}: H200 offset {:+#x}, sim offset {:+#x}", where,
                                       signed_diff(gpu, *gpu_anchor), signed_diff(sim, *sim_anchor));
      }
    };
    const std::string pass_name = pass["pass"];
    for (const json& r : pass["resident"]) {
      auto p = d->malloc(r["size"].get<Bytes>());
      ASSERT_TRUE(p);
      check(pass_name + " resident", hex(r["ptr"]), *p);
    }
    for (const json& seq : pass["sequences"]) {
      std::map<std::string, DevPtr> live;
      std::uint64_t gpu_free = seq["free_before"];
      Bytes sim_used = d->used_bytes();
      for (const json& e : seq["events"]) {
        const std::string where = fmt::format("{} / {} / {} {}", pass_name, seq["name"].get<std::string>(),
                                              e["op"].get<std::string>(), e["label"].get<std::string>());
        if (e["op"] == "alloc") {
          auto p = d->malloc(e["size"].get<Bytes>());
          ASSERT_TRUE(p) << where;
          live[e["label"]] = *p;
          check(where, hex(e["ptr"]), *p);
        } else {
          d->free(live.at(e["label"]));
          live.erase(e["label"]);
        }
        // Physical memory: the H200's free-memory delta against the sim's used-bytes delta.
        std::int64_t gpu_taken = signed_diff(gpu_free, e["free"].get<std::uint64_t>());
        std::int64_t sim_taken = signed_diff(d->used_bytes(), sim_used);
        EXPECT_EQ(gpu_taken, sim_taken) << where;
        gpu_free = e["free"];
        sim_used = d->used_bytes();
      }
    }
  }
  std::printf("[placement] %zu cudaMalloc pointers replayed, %zu at a different offset\n", allocs, mismatched);
  EXPECT_GT(allocs, 300u);
  EXPECT_EQ(mismatched, 0u) << "first: " << first_mismatch;
}

// The probe's small-allocation section: N cudaMallocs of one size take what the H200 took
// (1 B .. 1 MiB packed into shared 2 MiB pages at 512-byte steps, 1 MiB + 1 and up in whole
// pages) at the same stride.
TEST(SimPlacement, SmallAllocationsTakeWhatTheH200Took) {
  REQUIRE_PROBE("small");
  const json& small = probe()["small"];
  Bytes largest_packed = 0;
  for (const json& s : small["sizes"]) {
    auto d = h200_sim();
    const Bytes size = s["size"];
    const int n = s["n"];
    std::vector<DevPtr> ptrs;
    for (int i = 0; i < n; ++i) ptrs.push_back(*d->malloc(size));
    EXPECT_EQ(static_cast<std::int64_t>(d->used_bytes()), s["free_delta_bytes"].get<std::int64_t>())
        << n << " x " << size << " B";
    std::map<std::int64_t, int> strides;
    for (std::size_t i = 1; i < ptrs.size(); ++i) ++strides[signed_diff(ptrs[i], ptrs[i - 1])];
    auto mode = std::max_element(strides.begin(), strides.end(),
                                 [](auto& a, auto& b) { return a.second < b.second; });
    EXPECT_EQ(mode->first, s["stride_mode"].get<std::int64_t>()) << n << " x " << size << " B";
    // The probe recorded the first 8 pointers of each size.
    for (std::size_t i = 1; i < s["first_ptrs"].size(); ++i)
      EXPECT_EQ(signed_diff(ptrs[i], ptrs[0]), signed_diff(hex(s["first_ptrs"][i]), hex(s["first_ptrs"][0])))
          << n << " x " << size << " B, pointer " << i;
    for (DevPtr p : ptrs) d->free(p);
    EXPECT_EQ(d->used_bytes(), 0u);
    if (s["packed_below_2MiB_pages"].get<bool>()) largest_packed = std::max(largest_packed, size);
  }
  EXPECT_EQ(largest_packed, small["largest_size_packed_into_shared_2MiB_pages"].get<Bytes>());
}
