// Streaming replay: a trace is replayed in chunks ("steps"), each read in pieces (on the
// runner's worker thread where there are two CPUs); neither changes anything in the results, and an error deep in the file stops the
// run with the line, exit 2 and nothing written.
#include <gtest/gtest.h>

#include <sched.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/run/runner.h"
#include "test_helpers.h"
#include "workloads/trace.h"

namespace gmb {
namespace {

namespace fs = std::filesystem;
using testing::read_text;
using testing::run_gpumembench;
using testing::temp_dir;
using testing::write_text;

// Allocations of 1-64 MiB with frees in between, ids reused: OOMs under a small capacity.
std::string churn_trace(int events) {
  std::string t = "action,id,bytes,stream\n";
  std::vector<int> live;
  std::uint64_t x = 12345;
  int next_id = 0, made = 0;
  while (made < events) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (!live.empty() && (x >> 60) < 7) {
      const std::size_t k = (x >> 20) % live.size();
      t += "free," + std::to_string(live[k]) + ",," + std::to_string((x >> 8) & 1) + "\n";
      live.erase(live.begin() + std::ptrdiff_t(k));
    } else {
      t += "alloc," + std::to_string(next_id) + "," + std::to_string(((x >> 30) % 64 + 1) << 20) + "," +
           std::to_string((x >> 8) & 1) + "\n";
      live.push_back(next_id++);
    }
    ++made;
  }
  return t;
}

CaseResult replay(const std::string& path, std::size_t chunk) {
  CaseSpec spec{"caching", {}, [=] { return make_trace_workload(path, {}, chunk); }};
  DeviceSpec dev;
  dev.choice = DeviceChoice::Sim;
  dev.capacity_bytes = 1 * GiB;
  RunSettings settings;
  settings.on_oom = OnOom::Continue;
  return run_case(spec, dev, settings);
}

TEST(TraceReplay, ChunkSizeChangesNothingButTheStepCount) {
  auto dir = temp_dir("trace_replay");
  write_text(dir / "t.csv", churn_trace(5000));
  const std::string path = (dir / "t.csv").string();
  CaseResult whole = replay(path, 1 << 16), small = replay(path, 7);
  ASSERT_EQ(whole.runs.size(), 1u);
  ASSERT_EQ(small.runs.size(), 1u);
  const RunMetrics &a = whole.runs[0], &b = small.runs[0];
  EXPECT_EQ(a.events, 5000u);
  EXPECT_EQ(b.events, 5000u);
  EXPECT_EQ(a.steps_completed + (a.ooms ? 1 : 0), 1u);
  EXPECT_EQ(small.steps.size(), (5000u + 6) / 7);  // a step per chunk, the empty end step not counted
  EXPECT_GT(a.ooms, 0u);
  EXPECT_EQ(a.ooms, b.ooms);
  EXPECT_EQ(a.peak_reserved_bytes, b.peak_reserved_bytes);
  EXPECT_EQ(a.peak_allocated_bytes, b.peak_allocated_bytes);
  EXPECT_EQ(a.device_allocs, b.device_allocs);
  ASSERT_EQ(whole.oom_events.size(), small.oom_events.size());
  for (std::size_t i = 0; i < whole.oom_events.size(); ++i) {
    EXPECT_EQ(whole.oom_events[i].event, small.oom_events[i].event);
    EXPECT_EQ(small.oom_events[i].step, small.oom_events[i].event / 7);
  }
  EXPECT_FALSE(whole.recorded_ooms.has_value());  // a native CSV records no failures
  fs::remove_all(dir);
}

// A trace's steps as whole steps, each in one step_ops call (whole_step_ops): how the runner
// saw a trace before steps came in pieces.
class WholeSteps final : public Workload {
 public:
  explicit WholeSteps(std::unique_ptr<Workload> w) : w_(std::move(w)) {}
  std::string kind() const override { return w_->kind(); }
  std::string label() const override { return w_->label(); }
  std::uint64_t num_steps() const override { return w_->num_steps(); }
  void step_ops(std::uint64_t step, std::vector<Op>& out, StepInfo& info) override {
    whole_step_ops(*w_, step, out, info);
  }
  bool makes_ops_ahead() const override { return w_->makes_ops_ahead(); }
  bool gives_slots() const override { return w_->gives_slots(); }
  std::uint32_t slots_end() const override { return w_->slots_end(); }
  void finish() override { w_->finish(); }

 private:
  std::unique_ptr<Workload> w_;
};

// The same run, event for event: events, OOMs (with their steps), the step series, the need
// and the usage before the first OOM.
void expect_same_run(const CaseResult& a_case, const CaseResult& b_case, OnOom policy, int events, std::size_t chunk) {
  ASSERT_EQ(a_case.runs.size(), 1u);
  ASSERT_EQ(b_case.runs.size(), 1u);
  const RunMetrics &a = a_case.runs[0], &b = b_case.runs[0];
  EXPECT_GT(a.ooms, 0u);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.ooms, b.ooms);
  EXPECT_EQ(a.steps_completed, b.steps_completed);
  EXPECT_EQ(a.peak_reserved_bytes, b.peak_reserved_bytes);
  EXPECT_EQ(a.peak_allocated_bytes, b.peak_allocated_bytes);
  EXPECT_EQ(a.device_allocs, b.device_allocs);
  EXPECT_EQ(a.allocs, b.allocs);
  ASSERT_EQ(a_case.steps.size(), b_case.steps.size());
  if (policy == OnOom::Continue) {
    EXPECT_EQ(a_case.steps.size(), (std::size_t(events) + chunk - 1) / chunk);
  }
  for (std::size_t i = 0; i < a_case.steps.size(); ++i) {
    const StepSample &p = a_case.steps[i], &w = b_case.steps[i];
    SCOPED_TRACE(fmt::format("step {}", i));
    EXPECT_EQ(p.step, w.step);
    EXPECT_EQ(p.allocated_bytes, w.allocated_bytes);
    EXPECT_EQ(p.reserved_bytes, w.reserved_bytes);
    EXPECT_EQ(p.ooms, w.ooms);
    EXPECT_EQ(p.step_peak_allocated_bytes, w.step_peak_allocated_bytes);
    EXPECT_EQ(p.step_peak_reserved_bytes, w.step_peak_reserved_bytes);
    EXPECT_EQ(p.need_bytes, w.need_bytes);
    EXPECT_EQ(p.allocated_at_peak_reserved_bytes, w.allocated_at_peak_reserved_bytes);
  }
  ASSERT_TRUE(a_case.need && b_case.need);
  EXPECT_EQ(a_case.need->step_peak_requested_bytes, b_case.need->step_peak_requested_bytes);
  EXPECT_EQ(a_case.need->peak_requested_event, b_case.need->peak_requested_event);
  EXPECT_EQ(a_case.need->peak_rounded_bytes, b_case.need->peak_rounded_bytes);
  EXPECT_EQ(a_case.need->events, b_case.need->events);
  ASSERT_EQ(a_case.oom_events.size(), b_case.oom_events.size());
  for (std::size_t i = 0; i < a_case.oom_events.size(); ++i) {
    EXPECT_EQ(a_case.oom_events[i].event, b_case.oom_events[i].event);
    EXPECT_EQ(a_case.oom_events[i].step, b_case.oom_events[i].step);
    EXPECT_EQ(a_case.oom_events[i].kind, b_case.oom_events[i].kind);
  }
  ASSERT_EQ(a_case.oom_usage.size(), b_case.oom_usage.size());
  ASSERT_FALSE(a_case.oom_usage.empty());
  for (std::size_t i = 0; i < a_case.oom_usage.size(); ++i) {
    EXPECT_EQ(a_case.oom_usage[i].event, b_case.oom_usage[i].event);
    EXPECT_EQ(a_case.oom_usage[i].reserved_bytes, b_case.oom_usage[i].reserved_bytes);
  }
}

// A step read in pieces (kTracePieceOps) runs as that step whole: the same events, OOMs (with
// their steps), step series, need and usage before the first OOM, under every on_oom policy
// (skip_step skips the allocs of the step's later pieces too), for traces that end inside a
// piece, at a piece's end and at a step's end; with the pieces made on a worker thread (where
// the machine has two CPUs, as CI's has) and on the runner's own (the process on one CPU).
TEST(TraceReplay, AStepReadInPiecesRunsAsTheWholeStep) {
  auto dir = temp_dir("trace_pieces");
  constexpr std::size_t kChunk = 20000;  // steps of 8192 + 8192 + 3616 ops
  static_assert(kChunk > 2 * kTracePieceOps && kChunk < 3 * kTracePieceOps);
  for (int events : {50000, int(2 * kChunk + kTracePieceOps), int(2 * kChunk)}) {
    write_text(dir / "t.csv", churn_trace(events));
    const std::string path = (dir / "t.csv").string();
    for (OnOom policy : {OnOom::Continue, OnOom::SkipStep, OnOom::Stop}) {
      SCOPED_TRACE(fmt::format("{} events, on_oom {}", events, to_string(policy)));
      DeviceSpec dev;
      dev.choice = DeviceChoice::Sim;
      dev.capacity_bytes = 1 * GiB;
      RunSettings settings;
      settings.on_oom = policy;
      const CaseResult pieces =
          run_case({"caching", {}, [=] { return make_trace_workload(path, {}, kChunk); }}, dev, settings);
      const CaseResult whole = run_case(
          {"caching", {}, [=] { return std::make_unique<WholeSteps>(make_trace_workload(path, {}, kChunk)); }}, dev,
          settings);
      expect_same_run(pieces, whole, policy, events, kChunk);
      // On one CPU the pieces are made on the runner's own thread (no worker): the same run.
      // The thread's CPUs are given back however the run ends (later tests need the worker).
      struct Affinity {
        cpu_set_t all;
        bool got = sched_getaffinity(0, sizeof all, &all) == 0;
        ~Affinity() {
          if (got) sched_setaffinity(0, sizeof all, &all);
        }
      } affinity;
      ASSERT_TRUE(affinity.got);
      cpu_set_t one;
      CPU_ZERO(&one);
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &affinity.all)) {
          CPU_SET(c, &one);
          break;
        }
      ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
      const CaseResult one_cpu =
          run_case({"caching", {}, [=] { return make_trace_workload(path, {}, kChunk); }}, dev, settings);
      ASSERT_EQ(sched_setaffinity(0, sizeof affinity.all, &affinity.all), 0);
      expect_same_run(one_cpu, whole, policy, events, kChunk);
      if (::testing::Test::HasFailure()) break;
    }
  }
  fs::remove_all(dir);
}

TEST(TraceReplay, AnErrorDeepInTheFileStopsTheRunWithItsLineAndWritesNothing) {
  auto dir = temp_dir("trace_replay");
  std::string t = churn_trace(200000);
  t += "free,99999999,,0\n";
  const std::uint64_t bad_line = std::uint64_t(std::count(t.begin(), t.end(), '\n'));
  write_text(dir / "late.csv", t);
  auto out = dir / "out";
  auto tl = dir / "tl.csv";
  auto r = run_gpumembench("replay --device sim -q --capacity 1GiB --allocator caching --trace " +
                           (dir / "late.csv").string() + " --output " + out.string() + " --timeline " + tl.string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("late.csv:" + std::to_string(bad_line) + ": free of unknown id 99999999"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(tl));
  EXPECT_EQ(r.out.find("| allocator |"), std::string::npos) << "a table was printed: " << r.out;

  // The same through a config: the start is checked when the config loads, the rest as it runs.
  write_text(dir / "c.yaml",
             "name: late\nallocators: [caching]\nworkloads:\n  - trace: {path: late.csv}\nrun: {on_oom: continue}\n");
  r = run_gpumembench("--device sim -q --capacity 1GiB --config " + (dir / "c.yaml").string() + " --output " +
                      out.string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("late.csv:" + std::to_string(bad_line) + ": free of unknown id"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

TEST(TraceReplay, ConfigsAndReplaySayWhichFormatTheyDetected) {
  auto dir = temp_dir("trace_replay");
  write_text(dir / "t.csv", churn_trace(100));
  write_text(dir / "c.yaml", "name: fmt\nallocators: [caching]\nworkloads:\n  - trace: {path: t.csv}\n");
  auto r = run_gpumembench("--device sim --config " + (dir / "c.yaml").string() + " --output " + (dir / "o").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("gpumembench: trace " + (dir / "t.csv").string() + ": format native_csv"), std::string::npos)
      << r.out;
  r = run_gpumembench("replay --device sim --allocator caching --trace " + (dir / "t.csv").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("t.csv: format native_csv"), std::string::npos) << r.out;
  r = run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "t.csv").string());
  EXPECT_EQ(r.out.find("format native_csv"), std::string::npos) << r.out;

  // A bad start is a config error naming the key.
  write_text(dir / "bad.csv", "action,id,size\n");
  write_text(dir / "b.yaml", "name: b\nallocators: [caching]\nworkloads:\n  - trace: {path: bad.csv}\n");
  r = run_gpumembench("--device sim --config " + (dir / "b.yaml").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("workloads[0].trace.path"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bad.csv:1: unknown column 'size'"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// A relative trace path names the file beside the config, even where the working folder holds
// one of the same name; an empty path is named as such.
TEST(TraceReplay, ARelativeTracePathIsTheConfigsFolderFirst) {
  auto dir = temp_dir("trace_relative");
  fs::create_directories(dir / "cfg");
  fs::create_directories(dir / "cwd");
  write_text(dir / "cfg" / "t.csv", "action,id,bytes\nalloc,0,104857600\nfree,0,\n");
  write_text(dir / "cwd" / "t.csv", "action,id,bytes\nalloc,0,1000341504\nfree,0,\n");
  write_text(dir / "cfg" / "c.yaml", "name: rel\nallocators: [caching]\nworkloads:\n  - trace: {path: t.csv}\n");
  auto r = testing::run_gpumembench_with_prefix("cd " + (dir / "cwd").string() + " && ", "--device sim --capacity 8GiB --config ../cfg/c.yaml");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| caching | 100.0 MiB | 100.0 MiB |"), std::string::npos) << r.out;
  write_text(dir / "cfg" / "e.yaml", "name: e\nallocators: [caching]\nworkloads:\n  - trace: {path: \"\"}\n");
  r = run_gpumembench("--device sim --config " + (dir / "cfg" / "e.yaml").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("workloads[0].trace.path"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("empty: give the trace file to replay"), std::string::npos) << r.out;
  // Two files of one name would share a table label (and each other's baseline): refused.
  write_text(dir / "cfg" / "two.yaml", "name: two\nallocators: [caching]\nworkloads:\n  - trace: {path: t.csv}\n"
                                       "  - trace: {path: ../cwd/t.csv}\n");
  r = run_gpumembench("--device sim --config " + (dir / "cfg" / "two.yaml").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("key 'workloads[1].trace.path': another file of the name workloads[0] replays"),
            std::string::npos)
      << r.out;
  // The same file twice would be one section too.
  write_text(dir / "cfg" / "twice.yaml", "name: twice\nallocators: [caching]\nworkloads:\n  - trace: {path: t.csv}\n"
                                         "  - trace: {path: t.csv, memory_limit: 1GiB}\n");
  r = run_gpumembench("--device sim --capacity 8GiB --config " + (dir / "cfg" / "twice.yaml").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("key 'workloads[1].trace.path': the file workloads[0] replays"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gmb
