// The frontier's search range: values past the largest device and grids wider than the range
// are usage errors; the bisection never leaves [lo, hi] nor wraps near 2^64.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "harness/frontier/frontier.h"
#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace gmb::testing;

TEST(FrontierBounds, BisectionStaysInsideTheRange) {
  // The grid from lo does not reach hi exactly: the answer is still at most hi.
  auto b = gmb::bisect_frontier(gmb::FrontierDirection::SmallestPassing, 100, 1050, 300,
                                [](std::uint64_t v) { return v >= 1000; });
  ASSERT_TRUE(b.pass && b.fail);
  EXPECT_EQ(*b.pass, 1000u);
  EXPECT_EQ(*b.fail, 700u);
  b = gmb::bisect_frontier(gmb::FrontierDirection::SmallestPassing, 100, 1050, 5000,
                           [](std::uint64_t v) { return v >= 1000; });
  ASSERT_TRUE(b.pass);
  EXPECT_EQ(*b.pass, 1050u) << "a grid wider than the range probes its two ends";
  // Near 2^64: no wrap-around to a frontier of 0.
  b = gmb::bisect_frontier(gmb::FrontierDirection::SmallestPassing, 1, UINT64_MAX, 2 << 20,
                           [](std::uint64_t v) { return v >= (std::uint64_t{1} << 40); });
  ASSERT_TRUE(b.pass && b.fail);
  EXPECT_GE(*b.pass, std::uint64_t{1} << 40);
  EXPECT_LT(*b.fail, std::uint64_t{1} << 40);
  EXPECT_LE(*b.pass - *b.fail, std::uint64_t{2} << 20);
}

TEST(FrontierBounds, OutOfRangeFlagsAreUsageErrors) {
  auto dir = temp_dir("frontier_bounds");
  write_text(dir / "f.yaml",
             "device: {capacity: 2GiB}\nallocators: [caching]\n"
             "workloads:\n  - hole_pattern: {sizes: [200MiB, 200MiB], free: [0], probe: 300MiB}\n");
  const std::string base = "frontier --device sim --quiet --config " + (dir / "f.yaml").string() + " --output " +
                           (dir / "out").string();
  auto r = run_gpumembench(base + " --hi 18446744073709551615");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--hi: 18446744073709551615 is larger than 1024TiB"), std::string::npos) << r.out;
  r = run_gpumembench(base + " --lo 100MiB --hi 2GiB --resolution 100GiB");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--resolution: 102400 MiB is wider than the range [100 MiB, 2048 MiB] (valid: 1 B to 1948 MiB)"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}

// A trace whose memory_limit the recorded run ran under: the limit holds at every capacity the
// search tries, and "none in range" says so (not a capacity that a larger card would fix).
TEST(FrontierBounds, NoneInRangeNamesTheTracesMemoryLimit) {
  const auto dir = temp_dir("frontier_limit");
  write_text(dir / "lim.yaml",
             "name: lim\nallocators: [caching]\nworkloads:\n  - trace: {path: " +
                 source_path("tests/data/torch_snapshots/snap_oom_cap16g.pickle.gz") +
                 ", memory_limit: 16GiB}\nrun: {on_oom: continue}\n");
  auto r = run_gpumembench("frontier --device sim -q --config " + (dir / "lim.yaml").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| caching | trace[snap_oom_cap16g.pickle.gz] | none in range (the allocator's memory limit, "
                       "16.00 GiB, from the trace's memory_limit, holds at every capacity) |"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

// The bisection assumes more memory never causes an OOM; PyTorch's caching allocator breaks that
// on a real recording (its decisions depend on the capacity). The probes above the frontier find
// it, and the table says so beside the frontier, which stays what the bisection found.
TEST(FrontierBounds, AnOomAboveTheFrontierIsFoundAndSaid) {
  const auto dir = temp_dir("frontier_monotone");
  write_text(dir / "w.yaml", "name: w\nallocators: [caching]\nworkloads:\n  - trace: {path: " +
                                 source_path("tests/data/torch_snapshots/snap_default.pickle.gz") +
                                 "}\nrun: {on_oom: continue}\n");
  auto r = run_gpumembench("frontier --device sim -q --config " + (dir / "w.yaml").string() + " --output " +
                           (dir / "out").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| caching | trace[snap_default.pickle.gz] | 18152 MiB |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("- caching x trace[snap_default.pickle.gz]: not monotone: passed at 18152 MiB, OOM at 18664 "
                       "MiB (more memory)."),
            std::string::npos)
      << r.out;
  const std::string json = read_text(dir / "out" / "frontier.json");
  EXPECT_NE(json.find("\"not_monotone\""), std::string::npos) << json.substr(0, 2000);
  fs::remove_all(dir);
}
