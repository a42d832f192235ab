// Every published fragmentation metric (docs/METRICS.md), worked out by hand on the hole pattern
// (100, 200, 300 MiB; free the 200; ask 250 MiB): in results.json always, null where the
// allocator has no figure, in the Markdown table only when its family is asked for.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness/report/csv_report.h"
#include "harness/report/json_report.h"
#include "harness/report/markdown_report.h"
#include "harness/run/runner.h"
#include "test_helpers.h"
#include "workloads/hole_pattern.h"

using namespace gmb;
using namespace gmb::testing;

namespace {

RunReport hole_report() {
  RunReport r;
  r.device = sim_device_info({});
  for (const char* name : {"caching", "cuda_malloc", "bfc", "ideal"}) {
    CaseSpec spec{name, {}, [] { return make_hole_pattern(HolePatternParams{}); }};
    r.cases.push_back(run_case(spec, DeviceSpec{DeviceChoice::Sim, 8 * GiB}, RunSettings{}));
  }
  return r;
}

TEST(FragmentationMetrics, EachSourceDefinitionOnTheHolePattern) {
  const nlohmann::json j = to_json(hole_report());
  const nlohmann::json& caching = j.at("cases").at(0).at("fragmentation_metrics");
  // caching: segments 100, 200, 300, 250 MiB; at peak reserved (850) 650 MiB live and the freed
  // 200 MiB segment the only free block.
  EXPECT_NEAR(caching.at("gpumembench").get<double>(), 1 - 650.0 / 850, 1e-12);
  EXPECT_NEAR(caching.at("gmlake").get<double>(), 1 - 650.0 / 850, 1e-12) << "peak active = peak allocated";
  EXPECT_NEAR(caching.at("stalloc_utilization").get<double>(), 650.0 / 850, 1e-12);
  EXPECT_EQ(caching.at("stalloc_waste_bytes").get<Bytes>(), 200 * MiB);
  EXPECT_EQ(caching.at("tf_bfc_at_peak_reserved").get<double>(), 0.0) << "all free bytes in one block";
  EXPECT_EQ(caching.at("memory_viz_external_free_bytes").get<Bytes>(), 200 * MiB);
  EXPECT_EQ(caching.at("memory_viz_internal_free_bytes").get<Bytes>(), 0u) << "MiB sizes need no rounding";
  EXPECT_TRUE(caching.at("tf_bfc_at_first_oom").is_null()) << "no OOM";
  // cuda_malloc: its free space lives in the driver; the block-view figures are absent, not 0.
  const nlohmann::json& native = j.at("cases").at(1).at("fragmentation_metrics");
  for (const char* key : {"gmlake", "tf_bfc_at_peak_reserved", "memory_viz_internal_free_bytes",
                          "memory_viz_external_free_bytes"})
    EXPECT_TRUE(native.at(key).is_null()) << key;
  EXPECT_FALSE(native.at("stalloc_utilization").is_null());
  // bfc pre-allocates its limit (8 GiB less TF's 1800 MiB); the 200 MiB hole and the tail are free.
  const double pool = double(8 * GiB - 1800 * MiB), free = pool - double(650 * MiB);
  const nlohmann::json& bfc = j.at("cases").at(2).at("fragmentation_metrics");
  EXPECT_NEAR(bfc.at("tf_bfc_at_peak_reserved").get<double>(), double(200 * MiB) / free, 1e-12);
  EXPECT_TRUE(bfc.at("gmlake").is_null()) << "TF keeps no active-bytes statistic";
  // ideal: nothing free, ever.
  const nlohmann::json& ideal = j.at("cases").at(3).at("fragmentation_metrics");
  EXPECT_EQ(ideal.at("gpumembench").get<double>(), 0.0);
  EXPECT_EQ(ideal.at("memory_viz_external_free_bytes").get<Bytes>(), 0u);
}

TEST(FragmentationMetrics, TablesShowAFamilyOnlyWhenAsked) {
  RunReport r = hole_report();
  std::string md = markdown_table(r);
  EXPECT_EQ(md.find("GMLake"), std::string::npos) << md;
  EXPECT_NE(md.find("| fragmentation |"), std::string::npos) << md;
  r.metrics = {"gmlake", "memory_viz"};
  md = markdown_table(r);
  EXPECT_NE(md.find("frag. (GMLake)"), std::string::npos) << md;
  EXPECT_NE(md.find("external free (gaps)"), std::string::npos) << md;
  EXPECT_EQ(md.find("STAlloc"), std::string::npos) << md;
  // The CSV holds every metric whatever the tables show, empty where there is no figure.
  const auto rows = parse_csv(csv_table(r));
  EXPECT_EQ(rows.at(r.cases[1].label).at("fragmentation_tf_at_peak"), "");
  EXPECT_EQ(rows.at(r.cases[0].label).at("external_free_bytes"), std::to_string(200 * MiB));
}

TEST(FragmentationMetrics, AnUnknownFamilyIsAnError) {
  const auto dir = temp_dir("metrics_flag");
  write_text(dir / "c.yaml",
             "workloads:\n  - hole_pattern: {}\nallocators:\n  - caching\noutput:\n  metrics: [gmlake, tensorflow]\n");
  auto r = run_gpumembench("--config " + (dir / "c.yaml").string() + " --device sim --output " +
                           (dir / "out").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("output.metrics[1]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memory_viz"), std::string::npos) << r.out;
  write_text(dir / "d.yaml", "workloads:\n  - hole_pattern: {}\nallocators:\n  - caching\n");
  r = run_gpumembench("--config " + (dir / "d.yaml").string() + " --device sim --metrics gmlake,bogus --output " +
                      (dir / "out").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("--metrics: 'bogus' is not a metric family"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "out")) << "nothing is written";
  r = run_gpumembench("--config " + (dir / "d.yaml").string() + " --device sim --metrics all --quiet --output " +
                      (dir / "out").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(read_text(dir / "out" / "results.md").find("BFC frag. at peak"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// A merge writes the tables with the runs' metric families (recorded in each case file), or with
// those of its own --metrics.
TEST(FragmentationMetrics, MergeKeepsTheRunsFamiliesOrTakesItsOwn) {
  const auto dir = temp_dir("metrics_merge");
  write_text(dir / "c.yaml", "workloads:\n  - hole_pattern: {}\nallocators:\n  - caching\n  - cuda_malloc\n");
  auto r = run_gpumembench("--config " + (dir / "c.yaml").string() + " --device sim --metrics tf --quiet --output " +
                           (dir / "run").string());
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_NE(read_text(dir / "run" / "results.md").find("BFC frag. at peak"), std::string::npos);
  r = run_gpumembench("merge " + (dir / "run").string() + " --quiet --output " + (dir / "same").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(read_text(dir / "same" / "results.md").find("BFC frag. at peak"), std::string::npos);
  r = run_gpumembench("merge " + (dir / "run").string() + " --metrics gmlake --quiet --output " +
                      (dir / "gmlake").string());
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string md = read_text(dir / "gmlake" / "results.md");
  EXPECT_NE(md.find("frag. (GMLake)"), std::string::npos) << md;
  EXPECT_EQ(md.find("BFC frag. at peak"), std::string::npos) << md;
  r = run_gpumembench("merge " + (dir / "run").string() + " --metrics bogus --output " + (dir / "bad").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--metrics: 'bogus' is not a metric family"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "bad"));
  std::filesystem::remove_all(dir);
}

}  // namespace
