// OOMs on demand (issue 6): the fragmentation OOM config, the classification rule, the block
// map files, capacity sweeps and the OOM frontier, as a user meets them.
#include <gtest/gtest.h>

#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/units.h"
#include "devices/device.h"
#include "harness/frontier/frontier.h"
#include "harness/report/markdown_report.h"
#include "harness/report/oom_block_map.h"
#include "harness/report/report.h"
#include "harness/report/timeline_report.h"
#include "harness/run/runner.h"
#include "harness/run/workload_need.h"
#include "test_helpers.h"
#include "workloads/hole_pattern.h"
#include "workloads/trace.h"

using namespace gmb::testing;
using gmb::MiB;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const json* find_case(const json& j, const std::string& label_prefix, const std::string& label_suffix) {
  for (const auto& c : j["cases"]) {
    std::string l = c["label"];
    if (l.rfind(label_prefix, 0) == 0 && l.size() >= label_suffix.size() &&
        l.compare(l.size() - label_suffix.size(), label_suffix.size(), label_suffix) == 0)
      return &c;
  }
  return nullptr;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// Runs configs/fragmentation_oom.yaml on sim once for all the tests that read its output.
class FragmentationOomConfig : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(temp_dir("fragoom"));
    result_ = new CommandResult(run_gpumembench("--device sim --config " + source_path("configs/fragmentation_oom.yaml") +
                                                " --output " + (*dir_ / "out").string()));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete result_;
  }
  static fs::path out() { return *dir_ / "out"; }
  static json results() { return json::parse(read_text(out() / "results.json")); }
  static fs::path* dir_;
  static CommandResult* result_;
};
fs::path* FragmentationOomConfig::dir_ = nullptr;
CommandResult* FragmentationOomConfig::result_ = nullptr;

}  // namespace

// The old rule (fragmentation when the capacity minus the bytes allocated would hold the
// failed request) judged one request, not the workload: a job that needs 60 GiB on a 37 GiB
// card was labelled fragmentation at every OOM (issue 18). The rule now compares the capacity
// with what the workload needs from the OOM's step on.
TEST(OomClassification, CapacityWhenTheNeedFromThisStepOnExceedsTheCapacity) {
  using gmb::classify_oom;
  using gmb::OomKind;
  gmb::WorkloadNeed need;
  need.step_peak_requested_bytes = {600, 1200, 900, 300};
  need.requested_from_step_bytes = {1200, 1200, 900, 300};
  EXPECT_EQ(classify_oom(need, 0, 1000), OomKind::Capacity) << "step 1 needs 1200 > 1000: no packing helps";
  EXPECT_EQ(classify_oom(need, 1, 1200), OomKind::Fragmentation) << "exactly fits";
  EXPECT_EQ(classify_oom(need, 1, 1199), OomKind::Capacity);
  EXPECT_EQ(classify_oom(need, 2, 1000), OomKind::Fragmentation) << "the 1200 was before: from step 2 on, 900";
  EXPECT_EQ(classify_oom(need, 2, 899), OomKind::Capacity);
  EXPECT_EQ(classify_oom(need, 3, 0), OomKind::Capacity);
}

namespace {
gmb::Op alloc_op(gmb::BufferId id, gmb::Bytes bytes) { return {gmb::Op::Kind::Alloc, id, bytes, 0, 0}; }
gmb::Op free_op(gmb::BufferId id) { return {gmb::Op::Kind::Free, id, 0, 0, 0}; }
}  // namespace

TEST(WorkloadNeed, PeakLiveRequestedAndRoundedBytesWithTheirStepAndEvent) {
  EXPECT_EQ(gmb::torch_rounded_size(1), 512u);
  EXPECT_EQ(gmb::torch_rounded_size(512), 512u);
  EXPECT_EQ(gmb::torch_rounded_size(513), 1024u);
  EXPECT_EQ(gmb::torch_rounded_size(3 * MiB + 1), 3 * MiB + 512) << "large blocks: 512-byte steps too";
  gmb::Trace t;
  // Event 0..2: 1000 + 600 live (1600 requested, 1024 + 1024 rounded) then 1000 freed; events
  // 3..5: ten 100-byte buffers' rounding outweighs their bytes: 1000 requested, 5120 rounded.
  t.ops = {alloc_op(1, 1000), alloc_op(2, 600), free_op(1)};
  for (gmb::BufferId id = 10; id < 14; ++id) t.ops.push_back(alloc_op(id, 100));
  auto w = gmb::make_trace_workload(t);
  gmb::WorkloadNeed need = gmb::compute_workload_need(*w, 0);
  EXPECT_EQ(need.peak_requested_bytes, 1600u);
  EXPECT_EQ(need.peak_requested_event, 1u);
  EXPECT_EQ(need.peak_rounded_bytes, 1024u + 4 * 512u);
  EXPECT_EQ(need.peak_rounded_event, 6u);
  EXPECT_EQ(need.events, 7u);
  EXPECT_EQ(need.steps, 1u);
}

TEST(WorkloadNeed, CountsOnlyTheStepsTheRunMakes) {
  // configs/fragmentation_oom.yaml's pattern, 3 steps: 8 x 200 MiB live at once, then 8 x 110 +
  // 300 MiB; --steps 1 stops after the first.
  class Steps final : public gmb::Workload {
   public:
    std::string kind() const override { return "steps"; }
    std::string label() const override { return "steps"; }
    std::uint64_t num_steps() const override { return 3; }
    void step_ops(std::uint64_t step, std::vector<gmb::Op>& out, gmb::StepInfo&) override {
      // Step s holds (s + 1) x 100 MiB at its peak, freed by its end.
      for (gmb::BufferId i = 0; i <= step; ++i) out.push_back(alloc_op(i, 100 * MiB));
      for (gmb::BufferId i = 0; i <= step; ++i) out.push_back(free_op(i));
    }
  };
  Steps w;
  gmb::WorkloadNeed all = gmb::compute_workload_need(w, 0);
  EXPECT_EQ(all.peak_requested_bytes, 300 * MiB);
  EXPECT_EQ(all.peak_requested_step, 2u);
  EXPECT_EQ(all.peak_requested_event, 2u + 4u + 2u);
  EXPECT_EQ(all.step_peak_requested_bytes, (std::vector<gmb::Bytes>{100 * MiB, 200 * MiB, 300 * MiB}));
  EXPECT_EQ(all.requested_from(0), 300 * MiB);
  EXPECT_EQ(all.requested_from(3), 0u);
  gmb::WorkloadNeed two = gmb::compute_workload_need(w, 2);
  EXPECT_EQ(two.peak_requested_bytes, 200 * MiB);
  EXPECT_EQ(two.steps, 2u);
  EXPECT_EQ(two.events, 6u);
}

TEST_F(FragmentationOomConfig, DefaultCachingHitsAFragmentationOomThatExpandableSegmentsAvoid) {
  ASSERT_EQ(result_->status, 0) << result_->out;
  json j = results();
  ASSERT_EQ(j["cases"].size(), 8u) << "2 capacities x 4 allocators";
  const json* caching = find_case(j, "caching x hole_pattern", "@ 1.75 GiB");
  const json* expandable = find_case(j, "caching[expandable_segments:True] x hole_pattern", "@ 1.75 GiB");
  ASSERT_TRUE(caching && expandable) << result_->out;

  const json& oom = (*caching)["oom"];
  ASSERT_FALSE(oom.is_null());
  EXPECT_EQ(oom["kind"], "fragmentation");
  EXPECT_EQ(oom["step"], 0);
  EXPECT_EQ(oom["event"], 24);  // 8 allocs + 8 frees + 8 reuses, then the 300 MiB request
  EXPECT_EQ(oom["requested_bytes"], 300 * MiB);
  EXPECT_EQ(oom["allocated_bytes"], 880 * MiB);
  EXPECT_EQ(oom["reserved_bytes"], 1600 * MiB);
  EXPECT_EQ(oom["cached_bytes"], 720 * MiB);
  EXPECT_EQ(oom["largest_free_block_bytes"], 90 * MiB);
  EXPECT_EQ(oom["capacity_bytes"], 1792 * MiB);
  EXPECT_TRUE(oom["retried_after_freeing_cache"].get<bool>());
  // on_oom: continue, 3 steps: the same OOM every step, nothing else fails.
  EXPECT_EQ((*caching)["ooms"], 3);
  EXPECT_EQ((*caching)["ooms_by_kind"]["fragmentation"], 3);
  EXPECT_EQ((*caching)["ooms_by_kind"]["capacity"], 0);

  EXPECT_TRUE((*expandable)["oom"].is_null()) << (*expandable)["oom"].dump();
  EXPECT_EQ((*expandable)["ooms"], 0);
  EXPECT_EQ((*expandable)["steps_completed"], 3);

  // With 2 GiB there is room for the 300 MiB beside the 1600 MiB of segments: no OOM at all.
  const json* caching2 = find_case(j, "caching x hole_pattern", "@ 2.00 GiB");
  ASSERT_TRUE(caching2);
  EXPECT_TRUE((*caching2)["oom"].is_null());
  EXPECT_EQ((*caching2)["peak_reserved_bytes"], 1900 * MiB);

  // The workload needs 1600 MiB at its peak (eight 200 MiB tensors), less than 1.75 GiB: the
  // OOM is fragmentation by the workload's need too, and says what fixed it.
  EXPECT_EQ((*caching)["need"]["peak_requested_bytes"], 1600 * MiB);
  EXPECT_EQ((*caching)["need"]["peak_rounded_bytes"], 1600 * MiB);
  EXPECT_EQ((*caching)["need"]["peak_requested_step"], 0);
  EXPECT_EQ((*caching)["need"]["peak_requested_event"], 7);
  EXPECT_EQ(oom["need_from_here_bytes"], 1600 * MiB);
  EXPECT_EQ((*caching)["oom_diagnosis"]["what_would_fix_it"],
            "fits with a non-fragmenting allocator (needs 1.56 GiB); 720.0 MiB lost to fragmentation at the OOM; "
            "completed at this capacity: caching[expandable_segments:True], cuda_malloc, cuda_mempool");
  EXPECT_EQ((*caching)["oom_diagnosis"]["completed_at_same_capacity"].size(), 3u);
  // The sim's card is the H200's, of which the capacity is the part left (as a ballast leaves
  // it on the GPU); the capacity is the limit PyTorch calls "allowed".
  EXPECT_NE((*caching)["oom_diagnosis"]["message"].get<std::string>().find(
                "CUDA out of memory. Tried to allocate 300.00 MiB. GPU 0 has a total capacity of 139.80 GiB of "
                "which 192.00 MiB is free. 1.75 GiB allowed;"),
            std::string::npos);
}

TEST_F(FragmentationOomConfig, FragmentationAtPeakReservedAndAtTheFirstOom) {
  ASSERT_EQ(result_->status, 0) << result_->out;
  json j = results();
  // 1.75 GiB: reserved peaks at 1600 MiB with the eight 200 MiB tensors in it (nothing wasted
  // then); at the OOM 880 MiB of the 1600 MiB reserved are allocated: 45% fragmentation.
  const json& small = *find_case(j, "caching x hole_pattern", "@ 1.75 GiB");
  EXPECT_DOUBLE_EQ(small["fragmentation"].get<double>(), 0.0);
  EXPECT_EQ(small["fragmentation_at_peak_reserved"]["reserved_bytes"], 1600 * MiB);
  EXPECT_EQ(small["fragmentation_at_peak_reserved"]["allocated_bytes"], 1600 * MiB);
  EXPECT_NEAR(small["fragmentation_at_first_oom"].get<double>(), 1 - 880.0 / 1600.0, 1e-12);
  // 2 GiB: reserved peaks at 1900 MiB (the 300 MiB segment added); the most allocated while
  // 1900 MiB are reserved is the next step's 1600 MiB: 1 - 1600/1900 = 15.8%. No OOM.
  const json& big = *find_case(j, "caching x hole_pattern", "@ 2.00 GiB");
  EXPECT_EQ(big["fragmentation_at_peak_reserved"]["reserved_bytes"], 1900 * MiB);
  EXPECT_EQ(big["fragmentation_at_peak_reserved"]["allocated_bytes"], 1600 * MiB);
  EXPECT_NEAR(big["fragmentation"].get<double>(), 1 - 1600.0 / 1900.0, 1e-12);
  EXPECT_TRUE(big["fragmentation_at_first_oom"].is_null());
  // The step series: the most allocated during each step, not the 0 left at its end.
  const json& s = big["step_series"];
  std::vector<std::string> cols = s["columns"];
  auto col = [&](const std::string& name) { return std::size_t(std::find(cols.begin(), cols.end(), name) - cols.begin()); };
  ASSERT_EQ(s["rows"].size(), 3u);
  for (const auto& row : s["rows"]) {
    EXPECT_EQ(row[col("allocated_bytes")], 0) << "everything is freed by the step's end";
    EXPECT_EQ(row[col("step_peak_allocated_bytes")], 1600 * MiB);
    EXPECT_EQ(row[col("need_bytes")], 1600 * MiB);
  }
  EXPECT_EQ(s["rows"][0][col("step_peak_reserved_bytes")], 1900 * MiB);
}

TEST_F(FragmentationOomConfig, CapacitySweepLabelsEveryCaseAndReportsTheCapacityLeft) {
  ASSERT_EQ(result_->status, 0) << result_->out;
  EXPECT_NE(result_->out.find("capacity sweep 1.75 GiB, 2.00 GiB"), std::string::npos) << result_->out;
  json j = results();
  EXPECT_EQ(j["device"]["capacity_sweep_bytes"], json::array({1792 * MiB, 2048 * MiB}));
  std::size_t at175 = 0, at2 = 0;
  for (const auto& c : j["cases"]) {
    std::string l = c["label"];
    bool small = l.find("@ 1.75 GiB") != std::string::npos, big = l.find("@ 2.00 GiB") != std::string::npos;
    EXPECT_TRUE(small != big) << l;
    at175 += small;
    at2 += big;
    EXPECT_EQ(c["capacity_bytes"], small ? 1792 * MiB : 2048 * MiB) << l;
    EXPECT_EQ(c["capacity_requested_bytes"], c["capacity_bytes"]) << "sim leaves exactly what was asked";
    // A row named by the allocator's label, under a heading that names the workload and capacity.
    const std::string heading = "### " + c["workload_label"].get<std::string>() + (small ? " @ 1.75 GiB" : " @ 2.00 GiB");
    const std::size_t section = result_->out.find(heading + "\n");
    ASSERT_NE(section, std::string::npos) << heading << "\n" << result_->out;
    const std::size_t next = result_->out.find("### ", section + 4);
    EXPECT_NE(result_->out.substr(section, next - section).find("\n| " + c["allocator_label"].get<std::string>() + " | "),
              std::string::npos) << "table row for " << l;
  }
  EXPECT_EQ(at175, 4u);
  EXPECT_EQ(at2, 4u);
  EXPECT_EQ(count_of(result_->out, "\n### "), 2u) << "one section per capacity\n" << result_->out;
}

TEST_F(FragmentationOomConfig, EveryOutputCarriesTheOomDetails) {
  ASSERT_EQ(result_->status, 0) << result_->out;
  // Table: one row per case with an OOM, what would fix it first, then every detail.
  EXPECT_NE(result_->out.find("| fragmentation | fits with a non-fragmenting allocator (needs 1.56 GiB); 720.0 MiB "
                              "lost to fragmentation at the OOM; completed at this capacity: "
                              "caching[expandable_segments:True], cuda_malloc, cuda_mempool | 0 | 24 | 300.0 MiB | "
                              "880.0 MiB | 1.56 GiB | 720.0 MiB | 90.0 MiB | 45.0% | 1.75 GiB | yes | 3 / 0 | "
                              "oom/case00_caching.svg |"),
            std::string::npos)
      << result_->out;
  // PyTorch's own message, under the table of its section (1.75 GiB, the first).
  const std::size_t message = result_->out.find("\n- caching: CUDA out of memory. Tried to allocate 300.00 MiB.");
  EXPECT_NE(message, std::string::npos) << result_->out;
  EXPECT_LT(message, result_->out.find("@ 2.00 GiB\n")) << result_->out;
  EXPECT_NE(result_->out.find("3 OOMs (3 fragmentation, 0 capacity)"), std::string::npos);
  // CSV: the details as columns.
  auto rows = parse_csv(read_text(out() / "results.csv"));
  ASSERT_EQ(rows.size(), 8u);
  auto at = std::find_if(rows.begin(), rows.end(), [](auto& r) {
    return r.first.rfind("caching x", 0) == 0 && r.first.find("@ 1.75 GiB") != std::string::npos;
  });
  ASSERT_NE(at, rows.end());
  const auto& row = at->second;
  auto cell = [&](const std::string& name) {
    auto it = row.find(name);
    return it == row.end() ? std::string("<no column " + name + ">") : it->second;
  };
  EXPECT_EQ(cell("oom_allocated_bytes"), std::to_string(880 * MiB));
  EXPECT_EQ(cell("oom_reserved_bytes"), std::to_string(1600 * MiB));
  EXPECT_EQ(cell("oom_cached_bytes"), std::to_string(720 * MiB));
  EXPECT_EQ(cell("oom_largest_free_block_bytes"), std::to_string(90 * MiB));
  EXPECT_EQ(cell("oom_retried"), "1");
  EXPECT_EQ(cell("fragmentation_ooms"), "3");
  EXPECT_EQ(cell("capacity_ooms"), "0");
  EXPECT_EQ(cell("need_peak_requested_bytes"), std::to_string(1600 * MiB));
  EXPECT_EQ(cell("need_peak_rounded_bytes"), std::to_string(1600 * MiB));
  EXPECT_EQ(cell("oom_need_from_here_bytes"), std::to_string(1600 * MiB));
  EXPECT_EQ(cell("fragmentation_at_first_oom"), "0.450000");
  EXPECT_EQ(cell("oom_what_would_fix_it").substr(0, 42), "fits with a non-fragmenting allocator (nee");
  EXPECT_EQ(cell("oom_message").substr(0, 46), "CUDA out of memory. Tried to allocate 300.00 M");
}

TEST_F(FragmentationOomConfig, BlockMapAtTheFirstOomIsWrittenAsJsonAndSvg) {
  ASSERT_EQ(result_->status, 0) << result_->out;
  fs::path oom = out() / "oom";
  ASSERT_TRUE(fs::exists(oom / "case00_caching.json"));
  EXPECT_FALSE(fs::exists(oom / "case01_caching_expandable_segments_True.json")) << "no OOM, no block map";
  json s = json::parse(read_text(oom / "case00_caching.json"));
  EXPECT_EQ(s["oom"]["kind"], "fragmentation");
  ASSERT_EQ(s["segments"].size(), 8u);
  for (const auto& seg : s["segments"]) {
    EXPECT_EQ(seg["size"], 200 * MiB);
    EXPECT_EQ(seg["pool"], "large");
    ASSERT_EQ(seg["blocks"].size(), 2u);
    EXPECT_EQ(seg["blocks"][0]["state"], "allocated");
    EXPECT_EQ(seg["blocks"][0]["size"], 110 * MiB);
    EXPECT_EQ(seg["blocks"][1]["state"], "free");
    EXPECT_EQ(seg["blocks"][1]["offset"], 110 * MiB);
    EXPECT_EQ(seg["blocks"][1]["size"], 90 * MiB);
  }
  EXPECT_EQ(s["summary"]["holes"], 8);
  EXPECT_EQ(s["summary"]["hole_bytes"], 720 * MiB);
  EXPECT_EQ(s["summary"]["largest_hole_bytes"], 90 * MiB);
  EXPECT_EQ(s["summary"]["capacity_minus_reserved_bytes"], 192 * MiB);
  EXPECT_EQ(s["summary"]["capacity_minus_allocated_bytes"], 912 * MiB);
  EXPECT_EQ(s["usage_first_event"], 0) << "a short run keeps the usage after every event";
  EXPECT_EQ(s["need"]["peak_requested_bytes"], 1600 * MiB);
  EXPECT_EQ(s["oom"]["need_from_here_bytes"], 1600 * MiB);
  EXPECT_EQ(s["what_would_fix_it"].get<std::string>().substr(0, 38), "fits with a non-fragmenting allocator ");
  EXPECT_NE(s["what_would_fix_it"].get<std::string>().find("completed at this capacity: caching[expandable"),
            std::string::npos);
  EXPECT_EQ(s["oom"]["message"].get<std::string>().substr(0, 19), "CUDA out of memory.");
  EXPECT_EQ(s["usage_window_events"], 131072);

  std::string svg = read_text(oom / "case00_caching.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count_of(svg, ">hole 90.0 MiB</text>"), 8u) << "one labelled hole per segment row";
  EXPECT_EQ(count_of(svg, ">110.0 MiB</text>"), 8u);
  for (int i = 1; i <= 8; ++i) EXPECT_NE(svg.find(">#" + std::to_string(i) + " large segment 200.0 MiB<"), std::string::npos);
  EXPECT_EQ(svg.find(">#9 "), std::string::npos);
  EXPECT_NE(svg.find("largest hole 90.0 MiB &lt;"), std::string::npos);
  // Legend at the top, then the summary (holes by size, the largest and what pins them), then the map.
  const auto legend = svg.find(">allocated block</text>"), by_size = svg.find(">Holes by size: 8 holes, 720.0 MiB in all; "
                                                                             "the request needs one of at least 300.0 MiB</text>");
  const auto largest = svg.find(">hole 90.0 MiB in segment #1 (200.0 MiB): pinned by 1 allocated block of 110.0 MiB</text>");
  const auto map = svg.find(">Full map: 8 segment(s)");
  ASSERT_NE(legend, std::string::npos) << svg;
  ASSERT_NE(by_size, std::string::npos) << svg;
  ASSERT_NE(largest, std::string::npos) << svg;
  ASSERT_NE(map, std::string::npos) << svg;
  EXPECT_LT(legend, by_size);
  EXPECT_LT(by_size, largest);
  EXPECT_LT(largest, map);
  EXPECT_NE(svg.find(">8 hole(s), 720.0 MiB</text>"), std::string::npos) << "all eight in the 64-128 MiB bar";
  EXPECT_NE(svg.find(">0 hole(s), 0 B   &lt;- the request's size</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">... and 3 smaller or equal hole(s)</text>"), std::string::npos);

  // Usage up to the OOM: one row per event 0..24, values after the event.
  auto tl = lines_of(read_text(oom / "case00_caching.timeline.csv"));
  ASSERT_EQ(tl.size(), 26u);
  EXPECT_EQ(tl[0], "event,step,allocated_bytes,reserved_bytes");
  EXPECT_EQ(tl[1], fmt::format("0,0,{},{}", 200 * MiB, 200 * MiB));
  EXPECT_EQ(tl[8], fmt::format("7,0,{},{}", 1600 * MiB, 1600 * MiB));
  EXPECT_EQ(tl[16], fmt::format("15,0,0,{}", 1600 * MiB));
  EXPECT_EQ(tl[25], fmt::format("24,0,{},{}", 880 * MiB, 1600 * MiB));
  std::string tsvg = read_text(oom / "case00_caching.timeline.svg");
  EXPECT_NE(tsvg.find("<polyline"), std::string::npos);
  EXPECT_NE(tsvg.find("OOM: +300.0 MiB"), std::string::npos);
  // Every OOM of the run.
  auto ooms = lines_of(read_text(oom / "case00_caching.ooms.csv"));
  ASSERT_EQ(ooms.size(), 4u);
  EXPECT_EQ(ooms[1].substr(0, 22), "0,0,24,fragmentation,3");
  EXPECT_EQ(ooms[3].substr(0, 10), "2,2,92,fra");  // 34 events per step
  // results.json points at the files.
  json j = results();
  EXPECT_EQ(j["cases"][0]["oom_files"]["block_map_svg"], "oom/case00_caching.svg");
}

TEST(OomBlockMapSvg, DrawsUnmappedTailsAndSaysWhenAnAllocatorHasNoSegments) {
  gmb::CaseResult c;
  c.label = "caching[expandable_segments:True] x t";
  c.allocator = "caching";
  c.allocator_label = "caching[expandable_segments:True]";
  gmb::RunMetrics m;
  gmb::OomRecord o;
  o.kind = gmb::OomKind::Capacity;
  o.requested_bytes = 100 * MiB;
  o.allocated_bytes = 64 * MiB;
  o.reserved_bytes = 96 * MiB;
  o.cached_bytes = 32 * MiB;
  o.capacity_bytes = 128 * MiB;
  m.first_oom = o;
  m.ooms = m.capacity_ooms = 1;
  c.runs.push_back(m);
  c.oom_events.push_back(o);
  gmb::SegmentInfo seg;
  seg.address = 0x7f0000000000;
  seg.size = 160 * MiB;
  seg.pool = "large";
  seg.blocks = {{0, 64 * MiB, true, true}, {64 * MiB, 32 * MiB, false, true}, {96 * MiB, 64 * MiB, false, false}};
  c.oom_segments = {seg};
  gmb::DeviceInfo dev;
  dev.name = "test GPU";
  std::string svg = gmb::block_map_svg(c, dev);
  EXPECT_NE(svg.find(">unmapped 64.0 MiB (cut)</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">hole 32.0 MiB</text>"), std::string::npos);
  EXPECT_NE(svg.find("#1 large expandable 96.0 MiB"), std::string::npos) << "mapped bytes";
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  auto sum = gmb::summarize_block_map(c.oom_segments);
  EXPECT_EQ(sum.unmapped_bytes, 64 * MiB);
  EXPECT_EQ(sum.hole_bytes, 32 * MiB);
  EXPECT_EQ(sum.holes, 1u);

  c.oom_segments.clear();
  svg = gmb::block_map_svg(c, dev);
  EXPECT_NE(svg.find("does not report its segments"), std::string::npos);
  EXPECT_EQ(gmb::oom_file_stem(3, c), "case03_caching_expandable_segments_True");
}

TEST(FrontierBisection, FindsTheEdgeOnceProbingEachValueAtMostOnce) {
  using gmb::FrontierDirection;
  std::vector<std::uint64_t> probed;
  auto at_least_37 = [&](std::uint64_t v) {
    probed.push_back(v);
    return v >= 37;
  };
  auto r = gmb::bisect_frontier(FrontierDirection::SmallestPassing, 1, 100, 1, at_least_37);
  ASSERT_TRUE(r.pass && r.fail);
  EXPECT_EQ(*r.pass, 37u);
  EXPECT_EQ(*r.fail, 36u);
  EXPECT_EQ(probed[0], 100u) << "the easy end first";
  EXPECT_EQ(probed[1], 1u);
  EXPECT_LE(probed.size(), 2u + 7u);  // both ends, then log2(99) halvings
  std::sort(probed.begin(), probed.end());
  EXPECT_EQ(std::adjacent_find(probed.begin(), probed.end()), probed.end()) << "a value probed twice";

  auto at_most_37 = [](std::uint64_t v) { return v <= 37; };
  r = gmb::bisect_frontier(FrontierDirection::LargestPassing, 1, 100, 1, at_most_37);
  EXPECT_EQ(*r.pass, 37u);
  EXPECT_EQ(*r.fail, 38u);

  // A grid: only lo + k * resolution is tried.
  std::vector<std::uint64_t> grid;
  r = gmb::bisect_frontier(FrontierDirection::SmallestPassing, 8, 100, 4, [&](std::uint64_t v) {
    grid.push_back(v);
    return v >= 37;
  });
  EXPECT_EQ(*r.pass, 40u);
  EXPECT_EQ(*r.fail, 36u);
  for (auto v : grid) EXPECT_EQ((v - 8) % 4, 0u) << v;

  // Nothing passes; everything passes.
  r = gmb::bisect_frontier(FrontierDirection::SmallestPassing, 1, 100, 1, [](std::uint64_t) { return false; });
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(*r.fail, 100u);
  r = gmb::bisect_frontier(FrontierDirection::LargestPassing, 1, 100, 1, [](std::uint64_t) { return true; });
  EXPECT_EQ(*r.pass, 100u);
  EXPECT_FALSE(r.fail);
}

TEST(FrontierCli, CapacityFrontierOfTheFragmentationConfigOnSim) {
  auto dir = temp_dir("frontier");
  auto r = run_gpumembench("frontier --device sim --config " + source_path("configs/fragmentation_oom.yaml") +
                           " --output " + dir.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("smallest capacity without OOM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 1900 MiB | 1900 MiB | 1898 MiB: fragmentation OOM at step 0 (300.0 MiB requested) | 1900 MiB | "),
            std::string::npos)
      << "peak reserved in the capacities' unit\n" << r.out;
  json j = json::parse(read_text(dir / "frontier.json"));
  EXPECT_EQ(j["param"], "capacity");
  ASSERT_EQ(j["rows"].size(), 4u);
  std::map<std::string, json> rows;
  for (const auto& row : j["rows"]) rows[row["allocator"]] = row;
  // Default caching needs its 1600 MiB of split segments plus a new 300 MiB one.
  EXPECT_EQ(rows["caching"]["frontier"], 1900 * MiB);
  EXPECT_EQ(rows["caching"]["nearest_failure"], 1898 * MiB);
  EXPECT_EQ(rows["caching"]["nearest_failure_oom"]["kind"], "fragmentation");
  // Expandable segments need only the peak of what is allocated at once.
  EXPECT_EQ(rows["caching[expandable_segments:True]"]["frontier"], 1600 * MiB);
  EXPECT_EQ(rows["caching[expandable_segments:True]"]["nearest_failure"], 1598 * MiB);
  for (const auto& [name, row] : rows) {
    // The frontier and its neighbour were both run, with the outcomes claimed.
    bool pass_seen = false, fail_seen = false;
    for (const auto& p : row["probes"]) {
      if (p["value"] == row["frontier"]) pass_seen = p["passed"].get<bool>();
      if (p["value"] == row["nearest_failure"]) fail_seen = !p["passed"].get<bool>();
    }
    EXPECT_TRUE(pass_seen && fail_seen) << name;
  }
  EXPECT_TRUE(fs::exists(dir / "frontier.md"));
  auto csv = lines_of(read_text(dir / "frontier.csv"));
  ASSERT_EQ(csv.size(), 5u);
  EXPECT_NE(csv[1].find(std::to_string(1900 * MiB)), std::string::npos) << csv[1];
  fs::remove_all(dir);
}

TEST(FrontierCli, BatchFrontierOfATransformerHoldsWhenRunAtTheFrontierAndOneAbove) {
  auto dir = temp_dir("frontier_batch");
  auto config = [&](const std::string& batch) {
    return "name: tf\ndevice: {capacity: 4GiB}\nallocators: [caching]\nworkloads:\n"
           "  - transformer: {layers: 2, hidden: 512, heads: 8, batch: " +
           batch + ", steps: 8, seq_len: {dist: uniform, min: 64, max: 512, seed: 3}}\n";
  };
  write_text(dir / "tf.yaml", config("4"));
  auto r = run_gpumembench("frontier --param batch --device sim -q --config " + (dir / "tf.yaml").string() +
                           " --output " + (dir / "f").string());
  ASSERT_EQ(r.status, 0) << r.out;
  json j = json::parse(read_text(dir / "f" / "frontier.json"));
  ASSERT_EQ(j["rows"].size(), 1u);
  ASSERT_FALSE(j["rows"][0]["frontier"].is_null()) << j.dump(2);
  std::uint64_t b = j["rows"][0]["frontier"];
  EXPECT_GT(b, 1u);
  EXPECT_EQ(j["rows"][0]["nearest_failure"], b + 1);
  // An ordinary run at the frontier completes; one above it OOMs.
  for (std::uint64_t batch : {b, b + 1}) {
    write_text(dir / "run.yaml", config(std::to_string(batch)));
    auto out = dir / ("run" + std::to_string(batch));
    auto rr = run_gpumembench("--device sim -q --config " + (dir / "run.yaml").string() + " --output " + out.string());
    ASSERT_EQ(rr.status, 0) << rr.out;
    json res = json::parse(read_text(out / "results.json"));
    EXPECT_EQ(res["cases"][0]["oom"].is_null(), batch == b) << "batch " << batch;
  }
  fs::remove_all(dir);
}

TEST(FrontierCli, BadParametersAreUsageErrors) {
  auto dir = temp_dir("frontier_bad");
  auto r = run_gpumembench("frontier --param batch --device sim --config " + source_path("configs/fragmentation_oom.yaml") +
                           " --output " + (dir / "o").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("workload 'hole_pattern' has no parameter 'batch'"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "o"));
  r = run_gpumembench("frontier --lo lots --device sim --config " + source_path("configs/fragmentation_oom.yaml"));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--lo: 'lots' is not a size"), std::string::npos) << r.out;
  r = run_gpumembench("frontier --param depth --config " + source_path("configs/fragmentation_oom.yaml"));
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("capacity"), std::string::npos) << r.out;

  write_text(dir / "bad.yaml",
             "allocators: [caching]\nworkloads: [hole_pattern]\nfrontier: {param: batch}\n");
  r = run_gpumembench("--device sim --config " + (dir / "bad.yaml").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("bad.yaml:3:19"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("frontier.param"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cannot vary 'batch'"), std::string::npos) << r.out;

  write_text(dir / "bad2.yaml", "allocators: [caching]\nworkloads: [hole_pattern]\ndevice: {capacity: [1GiB, lots]}\n");
  r = run_gpumembench("--device sim --config " + (dir / "bad2.yaml").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("bad2.yaml:3:27"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("device.capacity[1]"), std::string::npos) << r.out;

  write_text(dir / "bad3.yaml", "allocators: [caching]\nworkloads: [hole_pattern]\nfrontier: {param: capacity, lo: 2GiB, hi: 1GiB}\n");
  r = run_gpumembench("--device sim --config " + (dir / "bad3.yaml").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("frontier.lo"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(FragmentationOomTrace, ReplayOfTheCommittedTraceGivesTheConfigsOoms) {
  // configs/traces/fragmentation_oom/ (scripts/gen_fragmentation_oom_trace.py) is what real
  // PyTorch replays on the GPU (scripts/torch_reference.py); it must be the config's events.
  auto dir = temp_dir("fragtrace");
  const std::string trace = source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv");
  for (const std::string conf : {"", "expandable_segments:True"}) {
    auto out = dir / (conf.empty() ? "default" : "expandable");
    auto r = run_gpumembench("replay --device sim -q --trace " + trace + " --allocator caching --capacity 1792MiB" +
                             (conf.empty() ? "" : " --alloc-conf " + conf) + " --output " + out.string());
    ASSERT_EQ(r.status, 0) << r.out;
    json c = json::parse(read_text(out / "results.json"))["cases"][0];
    if (conf.empty()) {
      EXPECT_EQ(c["ooms_by_kind"]["fragmentation"], 3);
      EXPECT_EQ(c["ooms_by_kind"]["capacity"], 0);
      EXPECT_EQ(c["oom"]["event"], 24);
      EXPECT_EQ(c["oom"]["largest_free_block_bytes"], 90 * MiB);
    } else {
      EXPECT_EQ(c["ooms"], 0);
    }
  }
  fs::remove_all(dir);
}

TEST(OomReport, TableSaysWhatCapacityTheBallastReallyLeft) {
  gmb::RunReport r;
  r.config_name = "x";
  r.device.kind = gmb::DeviceKind::Cuda;
  r.device.name = "GPU";
  gmb::CaseResult c;
  c.label = "caching x hole_pattern @ 1.75 GiB";
  c.capacity_requested_bytes = 1792 * MiB;
  c.capacity_bytes = 1792 * MiB - 917504;
  c.runs.push_back(gmb::RunMetrics{});
  r.cases = {c, c};
  std::string md = gmb::markdown_table(r);
  EXPECT_EQ(count_of(md, "asked 1.75 GiB -> 1878130688 bytes left"), 1u) << md;
  r.cases[0].capacity_bytes = r.cases[1].capacity_bytes = 1792 * MiB;
  EXPECT_EQ(gmb::markdown_table(r).find("bytes left"), std::string::npos);
}

TEST(FragmentationOomPolicies, OomsAreCountedUnderEveryOnOomPolicy) {
  auto dir = temp_dir("onoom");
  std::string yaml = read_text(source_path("configs/fragmentation_oom.yaml"));
  auto at = yaml.find("run: {on_oom: continue");
  ASSERT_NE(at, std::string::npos);
  for (auto [policy, ooms, steps] : {std::tuple{"stop", 1, 0}, std::tuple{"skip_step", 3, 0}, std::tuple{"continue", 3, 0}}) {
    std::string y = yaml;
    y.replace(at, std::string("run: {on_oom: continue").size(), std::string("run: {on_oom: ") + policy);
    y.replace(y.find("capacity: [1.75GiB, 2GiB]"), std::string("capacity: [1.75GiB, 2GiB]").size(), "capacity: 1.75GiB");
    write_text(dir / "c.yaml", y);
    auto out = dir / policy;
    auto r = run_gpumembench("--device sim -q --config " + (dir / "c.yaml").string() + " --output " + out.string());
    ASSERT_EQ(r.status, 0) << r.out;
    json c = json::parse(read_text(out / "results.json"))["cases"][0];
    EXPECT_EQ(c["ooms"], ooms) << policy;
    EXPECT_EQ(c["ooms_by_kind"]["fragmentation"], ooms) << policy;
    EXPECT_EQ(c["steps_completed"], steps) << policy << ": a step with an OOM is not completed";
    EXPECT_EQ(c["oom"]["event"], 24) << policy;
  }
  fs::remove_all(dir);
}

namespace {

// 1 MiB alloc/free pairs for `pairs` steps, then one request larger than the device.
class PairsThenTooLarge final : public gmb::Workload {
 public:
  explicit PairsThenTooLarge(std::uint64_t pairs) : pairs_(pairs) {}
  std::string kind() const override { return "pairs"; }
  std::string label() const override { return "pairs"; }
  std::uint64_t num_steps() const override { return pairs_ + 1; }
  void step_ops(std::uint64_t step, std::vector<gmb::Op>& out, gmb::StepInfo&) override {
    if (step < pairs_) {
      out.push_back({gmb::Op::Kind::Alloc, step + 1, MiB, 0});
      out.push_back({gmb::Op::Kind::Free, step + 1, 0, 0});
    } else {
      out.push_back({gmb::Op::Kind::Alloc, step + 1, 64 * gmb::GiB, 0});
    }
  }

 private:
  std::uint64_t pairs_;
};

}  // namespace

// A long run keeps the usage of the last events before its first OOM, in event order, ending
// with the OOM's own row; a short run keeps every event.
TEST(OomUsageWindow, LongRunsKeepTheLastEventsBeforeTheOomInOrder) {
  for (std::uint64_t pairs : {std::uint64_t(10), std::uint64_t(100000)}) {
    gmb::CaseSpec spec{"caching", {}, [pairs] { return std::make_unique<PairsThenTooLarge>(pairs); }};
    gmb::CaseResult r = gmb::run_case(spec, gmb::DeviceSpec{gmb::DeviceChoice::Sim, 8 * gmb::GiB}, gmb::RunSettings{});
    ASSERT_EQ(r.runs.size(), 1u);
    ASSERT_TRUE(r.runs[0].first_oom);
    const std::uint64_t oom_event = 2 * pairs;
    EXPECT_EQ(r.runs[0].first_oom->event, oom_event);
    const auto& u = r.oom_usage;
    ASSERT_FALSE(u.empty());
    const std::uint64_t kept = std::min<std::uint64_t>(oom_event + 1, r.oom_usage_window_events + 1);
    ASSERT_EQ(u.size(), kept) << pairs << " pairs";
    EXPECT_EQ(u.back().event, oom_event);
    EXPECT_EQ(u.front().event, oom_event + 1 - kept);
    for (std::size_t i = 1; i < u.size(); ++i) ASSERT_EQ(u[i].event, u[i - 1].event + 1) << "row " << i;
    // 1 MiB allocated after each alloc, none after each free; one 2 MiB segment held throughout.
    for (const auto& s : u) {
      if (s.event == oom_event) continue;
      EXPECT_EQ(s.allocated_bytes, s.event % 2 == 0 ? MiB : 0u) << "event " << s.event;
      EXPECT_EQ(s.reserved_bytes, 2 * MiB) << "event " << s.event;
    }
  }
}

// On sim the usage before the first OOM comes from a second run of the case up to that OOM (the
// first run keeps none: it would cost every event a store). A workload that does not repeat
// itself makes that run reach another OOM: the case then shows no usage window and says why in
// its notes, never the other run's usage; the first run's figures stand.
TEST(OomUsageWindow, OnSimASecondRunThatMeetsAnotherOomGivesNoWindowAndSaysSo) {
  auto made = std::make_shared<int>(0);
  gmb::CaseSpec spec{"caching", {}, [made] {
                       // The first workload made has 10 pairs before its OOM, every later one 5.
                       return std::make_unique<PairsThenTooLarge>(++*made == 1 ? 10 : 5);
                     }};
  const gmb::CaseResult r = gmb::run_case(spec, gmb::DeviceSpec{gmb::DeviceChoice::Sim, 8 * gmb::GiB}, gmb::RunSettings{});
  ASSERT_EQ(r.runs.size(), 1u);
  ASSERT_TRUE(r.runs[0].first_oom);
  EXPECT_EQ(r.runs[0].first_oom->event, 20u);
  EXPECT_EQ(r.runs[0].ooms, 1u);
  ASSERT_EQ(r.oom_events.size(), 1u);
  EXPECT_EQ(r.oom_events[0].event, 20u);
  EXPECT_TRUE(r.oom_usage.empty());
  ASSERT_EQ(r.workload_notes.size(), 1u);
  EXPECT_EQ(r.workload_notes[0],
            "the usage before the first OOM is not shown: the sim keeps it by running the case again to that OOM, "
            "and that run did not reach the same OOM");
  // The picture of the usage says so too, instead of empty axes.
  const std::string svg = gmb::usage_svg(r);
  EXPECT_NE(svg.find("Not drawn: the usage before the first OOM is not shown"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(gmb::usage_csv(r), "event,step,allocated_bytes,reserved_bytes\n");
  // A workload that repeats itself: the window, and no note.
  gmb::CaseSpec same{"caching", {}, [] { return std::make_unique<PairsThenTooLarge>(10); }};
  const gmb::CaseResult ok = gmb::run_case(same, gmb::DeviceSpec{gmb::DeviceChoice::Sim, 8 * gmb::GiB}, gmb::RunSettings{});
  EXPECT_EQ(ok.oom_usage.size(), 21u);
  EXPECT_TRUE(ok.workload_notes.empty());
  EXPECT_NE(gmb::usage_svg(ok).find("<polyline"), std::string::npos);
  EXPECT_EQ(gmb::usage_svg(ok).find("Not drawn"), std::string::npos);
}

namespace {

// Steps of 36 events in three runs of calls (compute ops between them): a short one (5 calls,
// sampled inline), a long one (21 calls) and another long one (10 calls), each with frees of
// an id that is not live (events without a usage sample: they free nothing), at the start,
// the middle and the end of a run; then one request larger than the device.
class GapsThenTooLarge final : public gmb::Workload {
 public:
  static constexpr std::uint64_t kEvents = 36;  // a step's allocs and frees
  static constexpr gmb::BufferId kNotLive = 999999999;
  // Positions in a step of the frees of kNotLive.
  static bool no_sample(std::uint64_t position) {
    return position == 3 || position == 25 || position == 27 || position == 35;
  }
  explicit GapsThenTooLarge(std::uint64_t steps) : steps_(steps) {}
  std::string kind() const override { return "gaps"; }
  std::string label() const override { return "gaps"; }
  std::uint64_t num_steps() const override { return steps_ + 1; }
  void step_ops(std::uint64_t step, std::vector<gmb::Op>& out, gmb::StepInfo&) override {
    using K = gmb::Op::Kind;
    const gmb::BufferId b = step * 100 + 1;
    if (step == steps_) {
      out.push_back({K::Alloc, b, 64 * gmb::GiB, 0});
      return;
    }
    out.push_back({K::Alloc, b, MiB, 0});  // 0
    out.push_back({K::Alloc, b + 1, MiB, 0});
    out.push_back({K::Free, b, 0, 0});
    out.push_back({K::Free, kNotLive, 0, 0});  // 3
    out.push_back({K::Free, b + 1, 0, 0});
    out.push_back({K::Compute, 0, 0, 0});
    for (gmb::BufferId j = 0; j < 10; ++j) {  // 5 .. 24
      out.push_back({K::Alloc, b + 10 + j, (j + 1) * 512 * gmb::KiB, 0});
      out.push_back({K::Free, b + 10 + j, 0, 0});
    }
    out.push_back({K::Free, kNotLive, 0, 0});  // 25
    out.push_back({K::Compute, 0, 0, 0});
    out.push_back({K::Alloc, b + 30, 3 * MiB, 0});  // 26
    out.push_back({K::Free, kNotLive, 0, 0});       // 27
    out.push_back({K::Alloc, b + 31, MiB, 0});
    out.push_back({K::Alloc, b + 32, 2 * MiB, 0});
    out.push_back({K::Free, b + 30, 0, 0});
    out.push_back({K::Free, b + 31, 0, 0});
    out.push_back({K::Free, b + 32, 0, 0});
    out.push_back({K::Alloc, b + 33, 7 * MiB, 0});
    out.push_back({K::Free, b + 33, 0, 0});  // 34
    out.push_back({K::Free, kNotLive, 0, 0});  // 35
    out.push_back({K::Compute, 0, 0, 0});
  }

 private:
  std::uint64_t steps_;
};

}  // namespace

// The usage up to the first OOM says, for each event that freed or allocated something, the
// event, its step and the bytes in use after it, as the per-event timeline does: with events
// without a sample among them, runs of calls short and long, and a ring that wrapped (144,000
// samples, a window of 131,072); with and without a timeline (two ways of keeping it).
TEST(OomUsageWindow, EachRowHasItsEventStepAndBytesAcrossGapsAndStepsAfterTheRingWrapped) {
  static constexpr std::uint64_t kSteps = 4500, kE = GapsThenTooLarge::kEvents;
  gmb::CaseSpec spec{"caching", {}, [] { return std::make_unique<GapsThenTooLarge>(kSteps); }};
  const gmb::DeviceSpec dev{gmb::DeviceChoice::Sim, 8 * gmb::GiB};
  const gmb::CaseResult plain = gmb::run_case(spec, dev, gmb::RunSettings{});
  gmb::RunSettings with_timeline;
  with_timeline.timeline = true;
  const gmb::CaseResult timed = gmb::run_case(spec, dev, with_timeline);
  for (const gmb::CaseResult* r : {&plain, &timed}) {
    ASSERT_EQ(r->runs.size(), 1u);
    ASSERT_TRUE(r->runs[0].first_oom);
    EXPECT_EQ(r->runs[0].first_oom->event, kSteps * kE);
  }
  std::map<std::uint64_t, const gmb::TimelineRow*> by_event;
  for (const gmb::TimelineRow& t : timed.timeline) by_event[t.event] = &t;
  const auto& u = plain.oom_usage;
  const std::uint64_t samples = kSteps * (kE - 4);
  ASSERT_EQ(u.size(), std::min<std::uint64_t>(samples, plain.oom_usage_window_events) + 1);
  ASSERT_GT(samples, plain.oom_usage_window_events) << "the ring wraps";
  EXPECT_EQ(u.back().event, kSteps * kE);
  EXPECT_EQ(u.back().step, kSteps);
  for (std::size_t i = 0; i + 1 < u.size(); ++i) {
    const gmb::UsageSample& s = u[i];
    SCOPED_TRACE(fmt::format("row {} event {}", i, s.event));
    EXPECT_EQ(s.step, s.event / kE);
    EXPECT_FALSE(GapsThenTooLarge::no_sample(s.event % kE));
    const auto t = by_event.find(s.event);
    ASSERT_NE(t, by_event.end());
    EXPECT_EQ(s.allocated_bytes, t->second->allocated_bytes);
    EXPECT_EQ(s.reserved_bytes, t->second->reserved_bytes);
    if (i > 0) {  // the events between two rows are exactly those without a sample
      for (std::uint64_t e = u[i - 1].event + 1; e < s.event; ++e) {
        EXPECT_TRUE(GapsThenTooLarge::no_sample(e % kE)) << e;
      }
    }
    if (::testing::Test::HasFailure()) break;
  }
  ASSERT_EQ(timed.oom_usage.size(), u.size());
  for (std::size_t i = 0; i < u.size(); ++i) {
    ASSERT_EQ(timed.oom_usage[i].event, u[i].event) << i;
    ASSERT_EQ(timed.oom_usage[i].step, u[i].step) << i;
    ASSERT_EQ(timed.oom_usage[i].allocated_bytes, u[i].allocated_bytes) << i;
    ASSERT_EQ(timed.oom_usage[i].reserved_bytes, u[i].reserved_bytes) << i;
  }
  // The plain run takes each run of calls' peaks from the allocator (run_calls_highs), the timed
  // one reads every call's result: the same steps, event counts and peaks.
  EXPECT_EQ(plain.runs[0].events, timed.runs[0].events);
  EXPECT_EQ(plain.runs[0].ooms, timed.runs[0].ooms);
  EXPECT_EQ(plain.runs[0].peak_allocated_bytes, timed.runs[0].peak_allocated_bytes);
  EXPECT_EQ(plain.runs[0].peak_reserved_bytes, timed.runs[0].peak_reserved_bytes);
  ASSERT_EQ(plain.steps.size(), timed.steps.size());
  for (std::size_t i = 0; i < plain.steps.size(); ++i) {
    ASSERT_EQ(plain.steps[i].step_peak_allocated_bytes, timed.steps[i].step_peak_allocated_bytes) << i;
    ASSERT_EQ(plain.steps[i].step_peak_reserved_bytes, timed.steps[i].step_peak_reserved_bytes) << i;
    ASSERT_EQ(plain.steps[i].allocated_at_peak_reserved_bytes, timed.steps[i].allocated_at_peak_reserved_bytes) << i;
    ASSERT_EQ(plain.steps[i].allocated_bytes, timed.steps[i].allocated_bytes) << i;
  }
}

// On sim run_case computes the need from the run's own steps (the workload is read once) and
// classifies the OOMs met before it is known when the run ends; a run stopped by an OOM gets it
// from a pass of its own. Either way every figure is what the separate pass gives.
TEST(WorkloadNeed, ARunOnSimClassifiesItsOomsAsTheSeparatePassDoes) {
  const gmb::Config config = gmb::load_config(source_path("configs/fragmentation_oom.yaml"));
  const auto& w = config.workloads.at(0);
  const auto given = std::make_shared<const gmb::WorkloadNeed>(gmb::compute_workload_need(*w.make(), 0));
  std::size_t fragmentation = 0, capacity = 0;
  std::vector<gmb::Bytes> capacities = config.capacities;  // 1.75 and 2 GiB: fragmentation OOMs
  capacities.push_back(1024 * MiB);                        // below the 1600 MiB need: capacity OOMs
  for (gmb::OnOom policy : {gmb::OnOom::Continue, gmb::OnOom::Stop, gmb::OnOom::SkipStep})
    for (gmb::Bytes cap : capacities)
      for (const auto& a : config.allocators) {
        SCOPED_TRACE(fmt::format("{} {} at {} MiB", a.name, gmb::to_string(policy), cap / MiB));
        gmb::DeviceSpec dev;
        dev.choice = gmb::DeviceChoice::Sim;
        dev.capacity_bytes = cap;
        gmb::RunSettings settings = config.run;
        settings.on_oom = policy;
        settings.repeat = 2;
        const gmb::CaseResult own = gmb::run_case({a.name, a.options, w.make}, dev, settings);
        const gmb::CaseResult separate = gmb::run_case({a.name, a.options, w.make, given}, dev, settings);
        ASSERT_TRUE(own.need);
        EXPECT_EQ(own.need->peak_requested_bytes, given->peak_requested_bytes);
        EXPECT_EQ(own.need->peak_requested_event, given->peak_requested_event);
        EXPECT_EQ(own.need->peak_rounded_bytes, given->peak_rounded_bytes);
        EXPECT_EQ(own.need->events, given->events);
        EXPECT_EQ(own.need->step_peak_requested_bytes, given->step_peak_requested_bytes);
        EXPECT_EQ(own.need->requested_from_step_bytes, given->requested_from_step_bytes);
        ASSERT_EQ(own.runs.size(), 2u);
        for (std::size_t r = 0; r < 2; ++r) {
          EXPECT_EQ(own.runs[r].ooms, separate.runs[r].ooms);
          EXPECT_EQ(own.runs[r].capacity_ooms, separate.runs[r].capacity_ooms);
          EXPECT_EQ(own.runs[r].fragmentation_ooms, separate.runs[r].fragmentation_ooms);
          ASSERT_EQ(own.runs[r].first_oom.has_value(), separate.runs[r].first_oom.has_value());
          if (own.runs[r].first_oom) {
            EXPECT_EQ(own.runs[r].first_oom->kind, separate.runs[r].first_oom->kind);
            EXPECT_EQ(own.runs[r].first_oom->need_from_here_bytes, separate.runs[r].first_oom->need_from_here_bytes);
          }
        }
        fragmentation += own.runs[0].fragmentation_ooms;
        capacity += own.runs[0].capacity_ooms;
        ASSERT_EQ(own.oom_events.size(), separate.oom_events.size());
        for (std::size_t i = 0; i < own.oom_events.size(); ++i) {
          EXPECT_EQ(own.oom_events[i].kind, separate.oom_events[i].kind) << i;
          EXPECT_EQ(own.oom_events[i].need_from_here_bytes, separate.oom_events[i].need_from_here_bytes) << i;
        }
        ASSERT_EQ(own.steps.size(), separate.steps.size());
        for (std::size_t i = 0; i < own.steps.size(); ++i) EXPECT_EQ(own.steps[i].need_bytes, separate.steps[i].need_bytes) << i;
      }
  EXPECT_GT(fragmentation, 0u) << "the config has fragmentation OOMs: the comparison covers them";
  EXPECT_GT(capacity, 0u) << "and capacity OOMs";
}

namespace {

// The hole pattern, with a library setup that finds no device memory, as cuBLAS's handle on a
// card the ballast has filled (CUBLAS_STATUS_ALLOC_FAILED).
class SetupOomWorkload final : public gmb::Workload {
 public:
  SetupOomWorkload() : inner_(gmb::make_hole_pattern(gmb::HolePatternParams{})) {}
  std::string kind() const override { return inner_->kind(); }
  std::string label() const override { return inner_->label(); }
  std::uint64_t num_steps() const override { return inner_->num_steps(); }
  void step_ops(std::uint64_t step, std::vector<gmb::Op>& out, gmb::StepInfo& info) override {
    inner_->step_ops(step, out, info);
  }
  void prepare(gmb::ComputeContext&) override {
    throw gmb::DeviceOutOfMemory("cublasCreate ran out of device memory (CUBLAS_STATUS_ALLOC_FAILED)");
  }

 private:
  std::unique_ptr<gmb::Workload> inner_;
};

}  // namespace

// Issue 13: a driver OOM in the workload's library setup is the case's OOM, not an error.
TEST(SetupOom, IsARecordedCapacityOomOfTheCaseNotAnError) {
  gmb::CaseSpec spec{"caching", {}, [] { return std::make_unique<SetupOomWorkload>(); }};
  const gmb::CaseResult c = gmb::run_case(spec, gmb::DeviceSpec{gmb::DeviceChoice::Sim, 1 * gmb::GiB}, gmb::RunSettings{});
  EXPECT_TRUE(c.error.empty()) << c.error;
  ASSERT_EQ(c.runs.size(), 1u);
  const gmb::RunMetrics& m = c.runs.front();
  EXPECT_EQ(m.ooms, 1u);
  EXPECT_EQ(m.capacity_ooms, 1u);
  EXPECT_EQ(m.steps_completed, 0u);
  ASSERT_TRUE(m.first_oom);
  EXPECT_EQ(m.first_oom->kind, gmb::OomKind::Capacity);
  EXPECT_EQ(m.first_oom->message, "cublasCreate ran out of device memory (CUBLAS_STATUS_ALLOC_FAILED)");
  gmb::RunReport r;
  r.config_name = "setup_oom";
  r.device.kind = gmb::DeviceKind::Sim;
  r.device.capacity_bytes = 1 * gmb::GiB;
  r.cases.push_back(c);
  const std::string md = gmb::markdown_table(r);
  EXPECT_NE(md.find("capacity at step 0 (in the workload's setup (cuBLAS), before the first step)"), std::string::npos)
      << md;
}

// A case whose device cannot be made is in the tables as failed, under its full label.
TEST(CaseErrors, ACaseWhoseDeviceFailsStillNamesItsWorkload) {
  if (gmb::cuda_device_available()) GTEST_SKIP() << "a GPU is visible: the cuda device is made";
  gmb::CaseSpec spec{"caching", {}, [] { return gmb::make_hole_pattern(gmb::HolePatternParams{}); }};
  const gmb::CaseResult c = gmb::run_case(spec, gmb::DeviceSpec{gmb::DeviceChoice::Cuda, 1 * gmb::GiB}, gmb::RunSettings{});
  EXPECT_FALSE(c.error.empty());
  EXPECT_EQ(c.label, "caching x hole_pattern[100/200/300 MiB, free #1, probe 250 MiB]");
  EXPECT_EQ(c.workload, "hole_pattern");
}
