// The logging adaptors report every allocator event (with the segment changes under it), and a
// replay exported as an RMM log reads back as the same ops.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "allocators/adaptors/logging_allocator.h"
#include "allocators/registry.h"
#include "harness/export/rmm_log_writer.h"
#include "harness/run/runner.h"
#include "test_helpers.h"
#include "workloads/trace.h"

namespace gmb {
namespace {

namespace fs = std::filesystem;
using testing::run_gpumembench;
using testing::temp_dir;
using testing::write_text;

struct Collect final : AllocatorEventSink {
  std::vector<AllocatorEvent> events;
  void on_event(const AllocatorEvent& e) override { events.push_back(e); }
};

TEST(LoggingAllocator, ReportsBlocksFailuresAndTheSegmentsUnderThem) {
  SimDeviceOptions o;
  o.capacity_bytes = 64 * MiB;
  auto device = make_sim_device(o);
  Collect sink;
  LoggingDevice logging_device(*device, sink);
  LoggingAllocator a(make_allocator("caching", logging_device, {{"alloc_conf", "expandable_segments:True"}}), sink);
  auto p = a.allocate(10 * MiB, 1);
  ASSERT_TRUE(p);
  EXPECT_FALSE(a.allocate(100 * MiB, 1));
  a.deallocate(*p);
  using K = AllocatorEvent::Kind;
  std::vector<K> kinds;
  for (const auto& e : sink.events) kinds.push_back(e.kind);
  ASSERT_GE(kinds.size(), 3u);
  EXPECT_EQ(kinds.front(), K::SegmentMap) << "expandable segments map pages before the block is handed out";
  const auto alloc = std::find(kinds.begin(), kinds.end(), K::Alloc) - kinds.begin();
  const auto failed = std::find(kinds.begin(), kinds.end(), K::AllocFailed) - kinds.begin();
  const auto freed = std::find(kinds.begin(), kinds.end(), K::Free) - kinds.begin();
  ASSERT_LT(alloc, failed);
  ASSERT_LT(failed, freed);
  EXPECT_EQ(sink.events[std::size_t(alloc)].ptr, *p);
  EXPECT_EQ(sink.events[std::size_t(alloc)].bytes, 10 * MiB);
  EXPECT_EQ(sink.events[std::size_t(alloc)].stream, 1);
  EXPECT_EQ(sink.events[std::size_t(failed)].bytes, 100 * MiB);
  EXPECT_EQ(sink.events[std::size_t(freed)].bytes, 10 * MiB) << "a free carries its allocation's size";

  // cudaMalloc segments: one per request, given back on free.
  Collect plain;
  LoggingDevice d2(*device, plain);
  LoggingAllocator b(make_allocator("cuda_malloc", d2, {}), plain);
  auto q = b.allocate(3 * MiB, 0);
  ASSERT_TRUE(q);
  b.deallocate(*q);
  ASSERT_EQ(plain.events.size(), 4u);
  EXPECT_EQ(plain.events[0].kind, K::SegmentAlloc);
  EXPECT_EQ(plain.events[1].kind, K::Alloc);
  EXPECT_EQ(plain.events[2].kind, K::Free);
  EXPECT_EQ(plain.events[3].kind, K::SegmentFree);
  EXPECT_EQ(plain.events[3].bytes, plain.events[0].bytes);
}

// Ops equal up to a renaming of ids (the export's ids are dense and reused); a free replays on
// its allocation's stream whatever the native CSV's free row says, and the export writes that.
void expect_same_ops(const std::vector<Op>& want, const std::vector<Op>& got) {
  ASSERT_EQ(want.size(), got.size());
  std::map<BufferId, BufferId> to_got;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].kind, got[i].kind) << "op " << i;
    EXPECT_EQ(want[i].bytes, got[i].bytes) << "op " << i;
    if (want[i].kind == Op::Kind::Alloc) {
      EXPECT_EQ(want[i].stream, got[i].stream) << "op " << i;  // a free's stream is its allocation's
      to_got[want[i].id] = got[i].id;
    } else {
      ASSERT_TRUE(to_got.count(want[i].id)) << "op " << i;
      EXPECT_EQ(to_got[want[i].id], got[i].id) << "op " << i;
      to_got.erase(want[i].id);
    }
  }
}

std::string trace_text(int n) {
  std::string t = "action,id,bytes,stream\n";
  std::vector<int> live;
  std::uint64_t x = 99;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (!live.empty() && (x >> 61) < 4) {
      const std::size_t k = (x >> 20) % live.size();
      t += "free," + std::to_string(live[k]) + ",,0\n";
      live.erase(live.begin() + std::ptrdiff_t(k));
    } else {
      t += "alloc," + std::to_string(1000 + i) + "," + std::to_string(((x >> 30) % 48 + 1) << 20) + "," +
           std::to_string(i > 10 ? (x >> 8) & 1 : 0) + "\n";
      live.push_back(1000 + i);
    }
  }
  return t;
}

TEST(RmmLogExport, AReplayExportedAsAnRmmLogReadsBackAsTheSameOps) {
  auto dir = temp_dir("rmm_export");
  write_text(dir / "t.csv", trace_text(3000));
  const auto log = dir / "replay.rmm.csv";
  auto r = run_gpumembench("replay --device sim --allocator caching --trace " + (dir / "t.csv").string() +
                           " --export-rmm-log " + log.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("wrote the replay as an RMM log"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(log.string() + ".tmp"));
  auto original = read_trace((dir / "t.csv").string());
  auto exported = read_trace(log.string());
  expect_same_ops(original.ops, exported.ops);
  auto src = open_trace(log.string());
  EXPECT_EQ(src->meta().format, "rmm_log");
  fs::remove_all(dir);
}

// Logging the replay changes none of its results: the adaptor forwards what the harness asks of
// the allocator (its free space at the peak: the fragmentation figures).
TEST(RmmLogExport, ExportingTheLogChangesNoResult) {
  auto dir = temp_dir("rmm_export_same");
  write_text(dir / "t.csv", trace_text(3000));
  const std::string replay = "replay --device sim -q --allocator caching --capacity 2GiB --trace " +
                             (dir / "t.csv").string() + " --output ";
  auto a = run_gpumembench(replay + (dir / "a").string());
  auto b = run_gpumembench(replay + (dir / "b").string() + " --export-rmm-log " + (dir / "log.csv").string());
  ASSERT_EQ(a.status, 0) << a.out;
  ASSERT_EQ(b.status, 0) << b.out;
  auto ja = nlohmann::json::parse(testing::read_text(dir / "a" / "results.json"))["cases"][0];
  auto jb = nlohmann::json::parse(testing::read_text(dir / "b" / "results.json"))["cases"][0];
  for (const char* key : {"fragmentation_at_peak_reserved", "fragmentation_metrics", "peak_reserved_bytes",
                          "peak_allocated_bytes", "device_mallocs", "ooms"}) {
    EXPECT_EQ(ja[key], jb[key]) << key;
  }
  EXPECT_FALSE(ja["fragmentation_at_peak_reserved"].is_null());
  fs::remove_all(dir);
}

TEST(RmmLogExport, TheReplaysOomsBecomeTheLogsRecordedFailures) {
  auto dir = temp_dir("rmm_export");
  write_text(dir / "t.csv", trace_text(3000));
  const std::string path = (dir / "t.csv").string(), log = (dir / "out.csv").string();
  CaseResult result;
  {
    RmmLogWriter writer(log);
    CaseSpec spec{"caching", {}, [&] { return make_trace_workload(path, {}, 100); }};
    DeviceSpec dev;
    dev.choice = DeviceChoice::Sim;
    dev.capacity_bytes = 512 * MiB;
    RunSettings settings;
    settings.on_oom = OnOom::Continue;
    settings.event_sink = &writer;
    result = run_case(spec, dev, settings);
    writer.commit();
  }
  ASSERT_EQ(result.runs.size(), 1u);
  const std::uint64_t ooms = result.runs[0].ooms;
  ASSERT_GT(ooms, 0u);
  ASSERT_EQ(result.oom_events.size(), ooms);
  // The original ops, each failed allocation an attempt freed right away (as the reader replays
  // an `allocate failure` row), without the later frees of what the failures did not get.
  auto original = read_trace(path).ops;
  std::vector<Op> want;
  std::set<BufferId> failed;
  std::vector<std::uint64_t> want_events;
  std::size_t k = 0;
  for (std::size_t i = 0; i < original.size(); ++i) {
    const Op& op = original[i];
    if (k < result.oom_events.size() && result.oom_events[k].event == i) {
      ++k;
      failed.insert(op.id);
      want_events.push_back(want.size());
      want.push_back(op);
      Op free = op;
      free.kind = Op::Kind::Free;
      free.bytes = 0;
      want.push_back(free);
      continue;
    }
    if (op.kind == Op::Kind::Free && failed.erase(op.id)) continue;
    want.push_back(op);
  }
  auto src = open_trace(log);
  std::vector<Op> got;
  while (src->read(got, 1000) > 0) {
  }
  expect_same_ops(want, got);
  EXPECT_EQ(src->meta().recorded_ooms, ooms);
  EXPECT_EQ(src->meta().recorded_oom_events, want_events);
  fs::remove_all(dir);
}

TEST(RmmLogExport, AFailedReplayLeavesNoLog) {
  auto dir = temp_dir("rmm_export");
  write_text(dir / "t.csv", trace_text(500) + "free,424242,,0\n");
  const auto log = dir / "x.csv";
  auto r = run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "t.csv").string() +
                           " --export-rmm-log " + log.string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_FALSE(fs::exists(log));
  EXPECT_FALSE(fs::exists(log.string() + ".tmp"));
  fs::remove_all(dir);
}

// A replay that stops at the allocator model's limit (more streams than the caching model
// keeps): exit 1 with the trace and the reason, and no RMM log, timeline or exported snapshot,
// which would each hold part of the trace.
TEST(RmmLogExport, AReplayStoppedByTheModelsLimitLeavesNoPartialFiles) {
  auto dir = temp_dir("rmm_export_limit");
  std::string text = "action,id,bytes,stream\n";
  for (int i = 0; i < 1025; ++i) text += "alloc," + std::to_string(i) + ",512," + std::to_string(i) + "\n";
  write_text(dir / "t.csv", text);
  const auto log = dir / "x.csv", timeline = dir / "tl.csv", snap = dir / "s.pickle";
  auto r = run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "t.csv").string() +
                           " --export-rmm-log " + log.string() + " --timeline " + timeline.string() +
                           " --export-snapshot " + snap.string() + " --output " + (dir / "out").string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(fs::exists(dir / "out" / "results.json")) << "the results say why the case could not run";
  EXPECT_FALSE(fs::exists(dir / "out" / "timelines")) << "no timeline of part of the trace";
  EXPECT_NE(r.out.find("trace " + (dir / "t.csv").string() + ": the replay through caching could not run to its end: "
                       "the caching allocator's model keeps free blocks of at most 1024 streams per pool"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("nothing written for --export-rmm-log, --timeline, --export-snapshot"), std::string::npos) << r.out;
  for (const auto& f : {log, timeline, snap}) {
    EXPECT_FALSE(fs::exists(f)) << f;
    EXPECT_FALSE(fs::exists(f.string() + ".tmp")) << f;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gmb
