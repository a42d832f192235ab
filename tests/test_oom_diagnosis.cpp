// Capacity or fragmentation, judged against what the workload needs (issue 18), as a user reads
// it: a job too big for its card is told how much it needs; a fragmentation OOM is told how much
// fragmentation cost and which settings of the same config completed at that capacity.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/units.h"
#include "harness/report/oom_diagnosis.h"
#include "harness/report/report.h"
#include "test_helpers.h"

using namespace gmb::testing;
using gmb::GiB;
using gmb::MiB;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

// The engineer's job: a GPT-style transformer (12 layers, hidden 2048, batch 8, lognormal
// lengths 128-2048, median 512) on a 40 GB card. Every setting runs out of memory; before issue
// 18 every OOM was labelled fragmentation. The workload needs 59.53 GiB at its peak (step 16):
// every OOM is a capacity OOM, and the table says how much is missing.
TEST(OomDiagnosis, AJobTooBigForItsCardGetsCapacityOomsWithWhatItNeeds) {
  auto dir = temp_dir("oomcap");
  auto r = run_gpumembench("--device sim -q --config " + source_path("configs/oom_capacity.yaml") + " --output " +
                           (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  json j = json::parse(read_text(dir / "out" / "results.json"));
  ASSERT_EQ(j["cases"].size(), 4u);
  for (const auto& c : j["cases"]) {
    const std::string label = c["label"];
    EXPECT_EQ(c["need"]["peak_requested_bytes"], 63924162180u) << label;
    EXPECT_EQ(c["need"]["peak_requested_step"], 16) << label;
    EXPECT_EQ(c["need"]["peak_rounded_bytes"], 63924163072u) << label;
    ASSERT_FALSE(c["oom"].is_null()) << label;
    EXPECT_EQ(c["oom"]["kind"], "capacity") << label;
    EXPECT_EQ(c["ooms_by_kind"]["fragmentation"], 0) << label;
    EXPECT_GT(c["ooms_by_kind"]["capacity"].get<int>(), 10) << label;
    EXPECT_EQ(c["oom_diagnosis"]["what_would_fix_it"], "needs at least 59.53 GiB (short by 22.28 GiB)") << label;
  }
  EXPECT_EQ(count_of(r.out, "| capacity | needs at least 59.53 GiB (short by 22.28 GiB) | 3 |"), 4u) << r.out;
  EXPECT_EQ(r.out.find("non-fragmenting"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// configs/dynamic_seq.yaml's OOM at step 223 (24 GiB, default caching): the workload needs
// 22.18 GiB at its peak, so it is a fragmentation OOM; the other caching settings complete.
TEST(OomDiagnosis, DynamicSeqOomAtStep223StaysFragmentation) {
  auto dir = temp_dir("oomdyn");
  auto r = run_gpumembench("--device sim -q --config " + source_path("configs/dynamic_seq.yaml") +
                           " --allocator caching --steps 230 --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  json j = json::parse(read_text(dir / "out" / "results.json"));
  ASSERT_EQ(j["cases"].size(), 3u);
  const json& c = j["cases"][0];
  ASSERT_EQ(c["allocator_label"], "caching");
  EXPECT_EQ(c["need"]["peak_requested_bytes"], 23818591748u);  // 22.18 GiB
  EXPECT_EQ(c["need"]["peak_requested_step"], 86);
  EXPECT_EQ(c["oom"]["step"], 223);
  EXPECT_EQ(c["oom"]["event"], 490784);
  EXPECT_EQ(c["oom"]["kind"], "fragmentation");
  EXPECT_EQ(c["oom_diagnosis"]["what_would_fix_it"],
            "fits with a non-fragmenting allocator (needs 22.18 GiB); 2.32 GiB lost to fragmentation at the OOM; "
            "completed at this capacity: caching[expandable_segments:True], caching[max_split_size_mb:128]");
  EXPECT_NEAR(c["fragmentation_at_first_oom"].get<double>(), 0.0991, 0.0001);
  // Fragmentation at peak reserved: 8.7% in the main table and at the end of the steps table
  // (which stops at the OOM's step).
  EXPECT_NEAR(c["fragmentation"].get<double>(), 0.0867, 0.0001);
  EXPECT_NE(r.out.find("| 8.7% |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 224: 23.65 GiB (8.7%) |"), std::string::npos) << r.out;
  for (std::size_t i = 1; i < 3; ++i) EXPECT_TRUE(j["cases"][i]["oom"].is_null()) << j["cases"][i]["label"];
  fs::remove_all(dir);
}

TEST(OomDiagnosis, SaysWhenNoOtherSettingCompletedAtTheSameCapacity) {
  gmb::RunReport r;
  auto make = [](const std::string& allocator, gmb::Bytes capacity, bool oom) {
    gmb::CaseResult c;
    c.allocator = c.allocator_label = allocator;
    c.workload_label = "w";
    c.capacity_bytes = capacity;
    auto need = std::make_shared<gmb::WorkloadNeed>();
    need->peak_requested_bytes = 3 * GiB;
    c.need = need;
    gmb::RunMetrics m;
    if (oom) {
      gmb::OomRecord o;
      o.kind = gmb::OomKind::Fragmentation;
      o.capacity_bytes = capacity;
      o.cached_bytes = 512 * MiB;
      m.first_oom = o;
      m.ooms = 1;
    }
    c.runs.push_back(m);
    return c;
  };
  r.cases = {make("caching", 4 * GiB, true), make("cuda_malloc", 4 * GiB, true), make("cuda_mempool", 8 * GiB, false)};
  EXPECT_EQ(gmb::oom_diagnosis_text(r, 0),
            "fits with a non-fragmenting allocator (needs 3.00 GiB); 512.0 MiB lost to fragmentation at the OOM; "
            "no other setting completed at this capacity");
  r.cases.pop_back();
  r.cases.pop_back();
  EXPECT_EQ(gmb::oom_diagnosis_text(r, 0),
            "fits with a non-fragmenting allocator (needs 3.00 GiB); 512.0 MiB lost to fragmentation at the OOM")
      << "no other setting ran at this capacity: nothing to say about them";
}

// An OOM with nothing cached (the H200's bfc[allow_growth] at 1.75 GiB): the text says where the
// memory went, not "0 B lost to fragmentation".
TEST(OomDiagnosis, AFragmentationOomWithNothingCachedSaysWhereTheMemoryWent) {
  gmb::CaseResult c;
  auto need = std::make_shared<gmb::WorkloadNeed>();
  need->peak_requested_bytes = 1600 * MiB;
  c.need = need;
  gmb::OomRecord o;
  o.kind = gmb::OomKind::Fragmentation;
  o.capacity_bytes = 1792 * MiB;
  o.requested_bytes = 200 * MiB;
  o.allocated_bytes = o.reserved_bytes = 1600 * MiB;
  o.live_requested_bytes = 1400 * MiB;
  EXPECT_EQ(gmb::oom_fix_text(c, o),
            "fits with a non-fragmenting allocator (needs 1.56 GiB); nothing cached at the OOM: 200.0 MiB lost to "
            "rounding inside live blocks (1.56 GiB allocated for 1.37 GiB requested), 192.0 MiB left unreserved for a "
            "request of 200.0 MiB");
}
