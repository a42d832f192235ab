// One JSON form of an OOM record (report/oom_json.h) in every file that holds one: a case's
// "oom" in results.json (what compare reads), the "oom" of the block-map file in oom/, and
// each frontier probe's "oom" in frontier.json carry the same fields with the same values.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "common/units.h"
#include "test_helpers.h"

using namespace gmb::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::set<std::string> keys(const json& j) {
  std::set<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
  return k;
}

}  // namespace

TEST(OomJson, ResultsOomFilesFrontierAndCompareCarryTheSameRecord) {
  auto dir = temp_dir("oom_json");
  // Two 200 MiB blocks, the first freed, then 300 MiB: 500 MiB live at once do not fit in
  // 450 MiB, even after the caching allocator frees its cache and retries.
  write_text(dir / "o.yaml",
             "name: oomjson\ndevice: {capacity: 450MiB}\nallocators: [caching]\n"
             "workloads:\n  - hole_pattern: {sizes: [200MiB, 200MiB], free: [0], probe: 300MiB}\n"
             "frontier: {lo: 400MiB, hi: 600MiB, resolution: 50MiB}\n");
  auto r = run_gpumembench("--device sim --quiet --format json --config " + (dir / "o.yaml").string() + " --output " +
                           (dir / "run").string());
  ASSERT_EQ(r.status, 0) << r.out;
  const json results = json::parse(read_text(dir / "run" / "results.json"));
  const json& oom = results["cases"][0]["oom"];
  ASSERT_TRUE(oom.is_object()) << results.dump(2);
  const std::set<std::string> expected = {"step",           "event",
                                          "kind",           "requested_bytes",
                                          "allocated_bytes", "reserved_bytes",
                                          "cached_bytes",   "live_requested_bytes", "largest_free_block_bytes",
                                          "capacity_bytes", "retried_after_freeing_cache",
                                          "need_from_here_bytes", "fragmentation",
                                          "message"};
  EXPECT_EQ(keys(oom), expected) << oom.dump(2);
  EXPECT_EQ(oom["requested_bytes"], 300 * gmb::MiB);
  EXPECT_NE(oom["message"].get<std::string>().find("out of memory"), std::string::npos) << oom.dump(2);

  // The block-map file holds the same record.
  const std::string state_file = results["cases"][0]["oom_files"]["state_json"];
  const json state = json::parse(read_text(dir / "run" / state_file));
  EXPECT_EQ(state["oom"], oom);

  // A frontier probe below the need: its OOM in the same form (it once lacked the message, the
  // need and the fragmentation).
  r = run_gpumembench("frontier --device sim --quiet --config " + (dir / "o.yaml").string() + " --output " +
                      (dir / "frontier").string());
  ASSERT_EQ(r.status, 0) << r.out;
  const json frontier = json::parse(read_text(dir / "frontier" / "frontier.json"));
  const json* probe_oom = nullptr;
  for (const auto& p : frontier["rows"][0]["probes"])
    if (p["capacity_bytes"] == 450 * gmb::MiB) probe_oom = &p["oom"];
  ASSERT_TRUE(probe_oom && probe_oom->is_object()) << frontier.dump(2);
  EXPECT_EQ(keys(*probe_oom), expected) << probe_oom->dump(2);
  EXPECT_EQ(*probe_oom, oom) << "the same workload at the same capacity fails at the same event";

  // compare reads the record back from results.json: kind and step in its table.
  r = run_gpumembench("compare " + (dir / "run").string() + " " + (dir / "run").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("capacity at step 0"), std::string::npos) << r.out;
  fs::remove_all(dir);
}
