// The simulated cudaMemPool at a tight cap with kernels running, against the H200's own runs
// committed in results/h200/probe/pool/ (band/: three unlogged runs of each transformer config
// at its 24 GiB cap; early/: the first steps of fixed_seq with every pool call logged). Where the
// H200 repeats itself (fixed_seq, to the byte) the sim must give its figure; where it does not,
// the sim must fall inside the band of its runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pool_call_logs.h"
#include "test_helpers.h"

using namespace gmb::testing;
using nlohmann::json;

namespace {

// The cases of `gpumembench --device sim --config configs/NAME.yaml --allocator cuda_mempool`.
json sim_pool_cases(const std::string& config, const std::string& extra, const std::string& prefix = "") {
  const auto dir = temp_dir("pool_at_cap");
  auto r = run_gpumembench_with_prefix(prefix, "--device sim -q --config " + source_path("configs/" + config + ".yaml") +
                                                   " --allocator cuda_mempool --format json " + extra + " --output " +
                                                   (dir / "out").string());
  EXPECT_EQ(r.status, 0) << r.out;
  json cases = json::parse(read_text(dir / "out" / "results.json"))["cases"];
  std::filesystem::remove_all(dir);
  return cases;
}

json h200_band_run(const std::string& name) {
  return json::parse(read_text(source_path("results/h200/probe/pool/band/" + name + "/results.json")))["cases"];
}

// The pool_reserved column of a call log's malloc_async rows.
std::vector<std::uint64_t> reserved_after_each_malloc(const std::string& log) {
  std::vector<std::uint64_t> out;
  std::istringstream in(log);
  std::string line;
  std::getline(in, line);  // call,bytes,ok,wait_us,call_us,ptr,pool_reserved,t_us,frees_done
  while (std::getline(in, line)) {
    if (line.rfind("malloc_async,", 0) != 0) continue;
    std::vector<std::string> f;
    std::istringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
    out.push_back(std::stoull(f.at(6)));
  }
  return out;
}

}  // namespace

// fixed_seq's pool peaks at 22.78 GiB in every H200 run (four, both rows): the sim gives the
// same bytes. Its peak comes in step 1, so 3 steps show it.
TEST(PoolAtCap, FixedSeqReservesWhatTheH200ReservedInEveryRun) {
  const json sim = sim_pool_cases("fixed_seq", "--steps 3");
  ASSERT_EQ(sim.size(), 2u);
  for (int run = 1; run <= 3; ++run) {
    const json h200 = h200_band_run("fixed_seq_r" + std::to_string(run));
    ASSERT_EQ(h200.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(h200[i]["allocator_label"], sim[i]["allocator_label"]);
      EXPECT_EQ(sim[i]["peak_reserved_bytes"], h200[i]["peak_reserved_bytes"]) << sim[i]["allocator_label"];
    }
  }
  EXPECT_EQ(sim[0]["peak_reserved_bytes"].get<std::uint64_t>(), 24461180928u);  // 22.78 GiB
}

// Call by call: the H200's log of those 3 steps (its pool's ReservedMemCurrent after each of its
// 4,744 requests) against the sim's log of the same run, with 2.6 us a call for what the log
// costs the H200's host. Before idle granules whose free the GPU had not reached stayed in place,
// the two parted at request 594 (the sim 64 MiB lower) and the sim peaked at 22.31 GiB.
TEST(PoolAtCap, FixedSeqReservedMatchesTheH200AfterEveryPoolRequest) {
  const auto h200 = reserved_after_each_malloc(h200_call_log("results/h200/probe/pool/early/fixed_seq_calls.csv.gz"));
  ASSERT_EQ(h200.size(), 4744u);

  std::vector<std::uint64_t> sim;  // the untrimmed pool's log: the first with pool calls
  for (const auto& log : sim_pool_call_logs("fixed_seq", 3))
    if (!(sim = reserved_after_each_malloc(log)).empty()) break;
  ASSERT_EQ(sim.size(), h200.size());
  std::size_t first_difference = sim.size();
  for (std::size_t i = 0; i < sim.size() && first_difference == sim.size(); ++i)
    if (sim[i] != h200[i]) first_difference = i;
  EXPECT_EQ(first_difference, sim.size()) << "request " << first_difference << ": H200 "
                                          << h200[first_difference] << " bytes reserved, sim " << sim[first_difference];
}

// dynamic_seq_eager: every H200 run of both pool rows (six each) ends in a fragmentation OOM at
// step 86, the step that needs the most; so does the sim's. The trimmed row trims after step
// 100, so up to that OOM both rows are the same run: the twelve H200 runs reserved 23.12-23.88
// GiB at it (results/h200/probe/pool/band/README.md), and the sim's peak must fall in there too.
TEST(PoolAtCap, DynamicSeqEagerEndsInTheH200sFragmentationOomAtStep86) {
  const json sim = sim_pool_cases("dynamic_seq_eager", "");
  ASSERT_EQ(sim.size(), 2u);
  const double GiB = 1024.0 * 1024 * 1024;
  for (const json& c : sim) {
    SCOPED_TRACE(c["allocator_label"].get<std::string>());
    ASSERT_FALSE(c["oom"].is_null());
    EXPECT_EQ(c["oom"]["kind"], "fragmentation");
    EXPECT_EQ(c["oom"]["step"], 86);
    const double peak = c["peak_reserved_bytes"].get<double>() / GiB;
    EXPECT_GE(peak, 23.12);
    EXPECT_LE(peak, 23.88);
  }
  for (int run = 1; run <= 3; ++run)
    for (const json& c : h200_band_run("dynamic_seq_eager_r" + std::to_string(run))) {
      EXPECT_EQ(c["oom"]["kind"], "fragmentation");
      EXPECT_EQ(c["oom"]["step"], 86);
    }
}

namespace {

struct Band {
  double low, high;  // GiB, the peak reserved bytes of the H200's runs (results/h200/probe/pool/band/README.md)
};

// The sim's peak of each pool row (untrimmed, trimmed) inside the H200's band, widened by
// `margin` (a fraction of the band's edge), and no OOM; and band/'s own runs of the config inside
// the band itself (the committed files are what the table says).
void expect_peaks_inside(const std::string& config, const Band (&band)[2], double margin = 0) {
  const json sim = sim_pool_cases(config, "");
  ASSERT_EQ(sim.size(), 2u);
  const double GiB = 1024.0 * 1024 * 1024;
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(config + " " + sim[i]["allocator_label"].get<std::string>());
    EXPECT_TRUE(sim[i]["oom"].is_null());
    const double peak = sim[i]["peak_reserved_bytes"].get<double>() / GiB;
    EXPECT_GE(peak, band[i].low * (1 - margin));
    EXPECT_LE(peak, band[i].high * (1 + margin));
  }
  for (int run = 1; run <= 3; ++run) {
    const json h200 = h200_band_run(config + "_r" + std::to_string(run));
    for (std::size_t i = 0; i < 2; ++i) {
      const double peak = h200[i]["peak_reserved_bytes"].get<double>() / GiB;
      EXPECT_GE(peak, band[i].low - 0.005);
      EXPECT_LE(peak, band[i].high + 0.005);
    }
  }
}

}  // namespace

// dynamic_seq: the H200's pool varies from run to run (untrimmed 23.25-24.00 GiB over ten runs,
// trimmed 23.09-23.56 over six); the sim's peaks must fall inside, with no OOM.
TEST(PoolAtCap, DynamicSeqPeaksInsideTheH200sBand) {
  expect_peaks_inside("dynamic_seq", {{23.25, 24.00}, {23.09, 23.56}});
}

// fixed_seq_eager: untrimmed 22.84-23.31 GiB over seven H200 runs. Its trimmed row peaks at
// 23.41-23.88 GiB on the H200 and OOMs after a trim in some runs (step 101 in 5 of 11:
// results/h200/probe/pool/trim/), not in others; the sim's does not, and is held to the peaks.
// This config's layout hangs on which frees the GPU has reached during the first step's growth
// (results/h200/probe/pool/early/): the sim's untrimmed row peaks at 22.50 GiB, 1.5% under the
// H200's lowest run (22.91 with 3 us more host time a pool call, 22.22 with session 9's model),
// its trimmed row at 23.62, inside. So the test allows 2% outside the H200's band, the figure
// issue 14 asks of every recorded case; the deterministic recordings (the mixes, the snapshots,
// fixed_seq) are held to the byte elsewhere.
TEST(PoolAtCap, FixedSeqEagerPeaksWithin2PercentOfTheH200sBand) {
  expect_peaks_inside("fixed_seq_eager", {{22.84, 23.31}, {23.41, 23.88}}, 0.02);
}
