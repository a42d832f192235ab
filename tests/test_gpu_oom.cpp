// GPU tests of issue 6: the fragmentation OOM config gives the same OOM, at the same event, with
// the same block map on the H200 as on sim; the capacity frontier holds on the real driver.
// Named Gpu*: they skip themselves where no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>

#include "gpu_test_helpers.h"

#include <nlohmann/json.hpp>

#include "devices/device.h"
#include "test_helpers.h"

using namespace gmb::testing;
using gmb::MiB;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json run_config_on(const std::string& device, const fs::path& out) {
  auto r = run_gpumembench("--device " + device + " -q --config " + source_path("configs/fragmentation_oom.yaml") +
                           " --output " + out.string());
  EXPECT_EQ(r.status, 0) << r.out;
  return json::parse(read_text(out / "results.json"));
}

const json& case_named(const json& j, const std::string& label_start, const std::string& at) {
  for (const auto& c : j["cases"]) {
    std::string l = c["label"];
    if (l.rfind(label_start, 0) == 0 && l.find(at) != std::string::npos) return c;
  }
  static const json none;
  ADD_FAILURE() << "no case " << label_start << " " << at;
  return none;
}

}  // namespace

TEST(GpuOom, FragmentationConfigOomsAtTheSameEventWithTheSameBlockMapAsOnSim) {
  REQUIRE_GPU();
  auto dir = temp_dir("gpu_fragoom");
  json gpu = run_config_on("cuda", dir / "cuda");
  json sim = run_config_on("sim", dir / "sim");
  const json& g = case_named(gpu, "caching x", "@ 1.75 GiB");
  const json& s = case_named(sim, "caching x", "@ 1.75 GiB");
  std::printf("[gpu] fragmentation_oom @ 1.75 GiB: capacity left %s bytes (asked %s, ballast %s)\n",
              g["capacity_bytes"].dump().c_str(), g["capacity_requested_bytes"].dump().c_str(),
              g["ballast_bytes"].dump().c_str());
  EXPECT_NEAR(g["capacity_bytes"].get<double>(), double(1792 * MiB), double(4 * MiB));
  ASSERT_FALSE(g["oom"].is_null()) << "default caching must OOM on the GPU too";
  for (const char* k : {"kind", "step", "event", "requested_bytes", "allocated_bytes", "reserved_bytes",
                        "cached_bytes", "largest_free_block_bytes", "retried_after_freeing_cache"})
    EXPECT_EQ(g["oom"][k], s["oom"][k]) << k;
  EXPECT_EQ(g["oom"]["kind"], "fragmentation");
  EXPECT_EQ(g["ooms"], 3);
  EXPECT_TRUE(case_named(gpu, "caching[expandable_segments:True] x", "@ 1.75 GiB")["oom"].is_null());
  EXPECT_TRUE(case_named(gpu, "caching x", "@ 2.00 GiB")["oom"].is_null());

  // The block map: same segments and blocks (addresses differ).
  json gm = json::parse(read_text(dir / "cuda" / "oom" / "case00_caching.json"));
  json sm = json::parse(read_text(dir / "sim" / "oom" / "case00_caching.json"));
  ASSERT_EQ(gm["segments"].size(), sm["segments"].size());
  for (std::size_t i = 0; i < gm["segments"].size(); ++i) {
    EXPECT_EQ(gm["segments"][i]["size"], sm["segments"][i]["size"]) << i;
    EXPECT_EQ(gm["segments"][i]["blocks"], sm["segments"][i]["blocks"]) << i;
  }
  EXPECT_TRUE(fs::exists(dir / "cuda" / "oom" / "case00_caching.svg"));
  // The usage up to the first OOM: on the GPU from the ring every event writes, on sim from a
  // second run up to that OOM. The same calls give the same bytes, event by event.
  const std::string g_usage = read_text(dir / "cuda" / "oom" / "case00_caching.timeline.csv");
  EXPECT_GT(std::count(g_usage.begin(), g_usage.end(), '\n'), 10) << g_usage;
  EXPECT_EQ(g_usage, read_text(dir / "sim" / "oom" / "case00_caching.timeline.csv"));
  std::printf("[gpu] fragmentation_oom usage up to the first OOM: %zu lines, the same as on sim\n",
              static_cast<std::size_t>(std::count(g_usage.begin(), g_usage.end(), '\n')));
  fs::remove_all(dir);
}

TEST(GpuOom, CapacityFrontierHoldsOnTheRealDriver) {
  REQUIRE_GPU();
  auto dir = temp_dir("gpu_frontier");
  // caching needs 1600 MiB of split segments plus a new 300 MiB one: 1900 MiB left to it.
  auto r = run_gpumembench("frontier --device cuda -q --config " + source_path("configs/fragmentation_oom.yaml") +
                           " --lo 1880MiB --hi 1920MiB --output " + dir.string());
  ASSERT_EQ(r.status, 0) << r.out;
  std::printf("%s\n", r.out.c_str());
  json j = json::parse(read_text(dir / "frontier.json"));
  bool seen = false;
  for (const auto& row : j["rows"]) {
    if (row["allocator"] != "caching") continue;
    seen = true;
    ASSERT_FALSE(row["frontier"].is_null()) << row.dump(2);
    // What counts is the capacity the ballast left, which may be a little under the one asked.
    EXPECT_GE(row["frontier_capacity_left_bytes"].get<std::uint64_t>(), 1900 * MiB);
    for (const auto& p : row["probes"])
      if (p["value"] == row["nearest_failure"]) {
        // The segments need 1900 MiB; on the H200 the driver's own bookkeeping made a probe
        // with 1901.1 MiB left still fail once (ctest run at 5f9644d), so allow a few MiB.
        EXPECT_LT(p["capacity_bytes"].get<std::uint64_t>(), 1908 * MiB);
        EXPECT_EQ(p["oom"]["kind"], "fragmentation");
      }
  }
  EXPECT_TRUE(seen);
  fs::remove_all(dir);
}

// Issue 13: on a card the ballast leaves almost empty, the first thing to run out of memory may
// be cuBLAS's own setup rather than the allocator: either way the case ends in a recorded OOM,
// never an error.
TEST(GpuOom, ACardTooSmallForTheLibrariesIsARecordedOomNotAnError) {
  REQUIRE_GPU();
  const fs::path dir = temp_dir("gpu_tiny");
  write_text(dir / "c.yaml",
             "name: tiny\n"
             "device: {capacity: 64MiB}\n"
             "allocators: [caching, cuda_malloc]\n"
             "workloads:\n"
             "  - transformer: {style: korthikanti, layers: 2, hidden: 1024, heads: 16, vocab: 50257, batch: 2,\n"
             "                  steps: 3, seq_len: {dist: fixed, value: 512}}\n"
             "output: {formats: [md, json]}\n");
  auto r = run_gpumembench("--device cuda -q --config " + (dir / "c.yaml").string() + " --output " + (dir / "out").string());
  const json j = json::parse(read_text(dir / "out" / "results.json"));
  ASSERT_EQ(j["cases"].size(), 2u) << r.out;
  for (const auto& c : j["cases"]) {
    EXPECT_FALSE(c.contains("error")) << c.dump();
    EXPECT_GE(c.value("ooms", 0), 1) << c["label"];
    // cuBLAS's handle takes about 64 MiB on the H200 (68 MiB with its first GEMMs), so which
    // runs out first, cuBLAS's setup or the allocator's first request, hangs on the few MiB the
    // ballast leaves over the capacity: at 3f41753 caching's first 32 MiB request failed with
    // cuBLAS set up, cuda_malloc's run failed in cublasCreate (earlier runs: both in cublasCreate).
    const std::string message = c["oom"].value("message", "");
    EXPECT_TRUE(message == "cublasCreate ran out of device memory (CUBLAS_STATUS_ALLOC_FAILED)" ||
                message.find("out of memory") != std::string::npos)
        << message;
    EXPECT_EQ(c["oom"].value("kind", ""), "capacity");
    std::printf("[gpu] %s: %s\n", c["label"].get<std::string>().c_str(),
                c["oom"].is_null() ? "no OOM" : c["oom"].dump().substr(0, 300).c_str());
  }
  fs::remove_all(dir);
}
