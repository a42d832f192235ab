// `gpumembench reduce` (issue 17): a trace's first OOM shrunk to a small reproducer, as a user
// sees it: the files written, the reduced trace replayed by the CLI (same OOM kind, at its last
// event; none under the contrast settings), every free with its allocation, the same result twice.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "common/units.h"
#include "harness/reduce/reduce.h"
#include "test_helpers.h"
#include "workloads/trace.h"

using namespace gmb::testing;
using gmb::GiB;
using gmb::MiB;
using gmb::Op;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Every free names a live allocation of the same trace; the last op is an allocation.
void expect_well_formed(const std::vector<Op>& ops) {
  std::set<gmb::BufferId> live;
  for (const Op& op : ops) {
    if (op.kind == Op::Kind::Alloc) {
      EXPECT_TRUE(live.insert(op.id).second) << "id " << op.id << " allocated twice";
    } else {
      EXPECT_EQ(live.erase(op.id), 1u) << "free of id " << op.id << " without its allocation";
    }
  }
  ASSERT_FALSE(ops.empty());
  EXPECT_EQ(ops.back().kind, Op::Kind::Alloc);
}

// The first OOM of `trace` replayed by the CLI (results.json's "oom"), or null.
json cli_first_oom(const fs::path& trace, const std::string& flags, const fs::path& out) {
  auto r = run_gpumembench("replay --device sim -q --trace " + trace.string() + " --allocator caching " + flags +
                           " --output " + out.string());
  EXPECT_EQ(r.status, 0) << r.out;
  return json::parse(read_text(out / "results.json"))["cases"][0]["oom"];
}

std::vector<Op> ops_of(const std::vector<std::tuple<char, gmb::BufferId, gmb::Bytes>>& rows) {
  std::vector<Op> ops;
  for (auto [kind, id, bytes] : rows) {
    Op op;
    op.kind = kind == 'a' ? Op::Kind::Alloc : Op::Kind::Free;
    op.id = id;
    op.bytes = bytes;
    ops.push_back(op);
  }
  return ops;
}

}  // namespace

// configs/fragmentation_oom.yaml's events (the committed trace, 102 events over three steps): the
// first OOM (300 MiB at 1.75 GiB, event 24) comes down to its essence: about 200 MiB segments split
// by about 110 MiB tensors, holes too small for the request, about 20 events. It still OOMs at its last event when the CLI
// replays it, as a fragmentation OOM, and runs under expandable_segments:True.
TEST(Reduce, FragmentationOomComesDownToItsEssence) {
  auto dir = temp_dir("reduce_frag");
  const std::string trace = source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv");
  auto r = run_gpumembench("reduce -q --trace " + trace + " --allocator caching --capacity 1792MiB "
                           "--contrast-alloc-conf expandable_segments:True --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("fragmentation OOM at event 24 (300.0 MiB request) reduced from 102 events (25 up to the OOM) to"),
            std::string::npos) << r.out;
  for (const char* f : {"reduced_trace.csv", "oom_block_map.svg", "summary.md", "repro_torch.py"})
    EXPECT_TRUE(fs::exists(dir / "out" / f)) << f;
  const gmb::Trace reduced = gmb::read_trace((dir / "out" / "reduced_trace.csv").string());
  expect_well_formed(reduced.ops);
  EXPECT_LE(reduced.ops.size(), 24u);
  EXPECT_GE(reduced.ops.size(), 10u);  // a 300 MiB request fails only with the holes in place
  EXPECT_EQ(reduced.ops.back().bytes, 300 * MiB);  // the failed request keeps its size
  const json oom = cli_first_oom(dir / "out" / "reduced_trace.csv", "--capacity 1792MiB", dir / "replay");
  ASSERT_FALSE(oom.is_null());
  EXPECT_EQ(oom["kind"], "fragmentation");
  EXPECT_EQ(oom["event"], reduced.ops.size() - 1);
  EXPECT_TRUE(cli_first_oom(dir / "out" / "reduced_trace.csv",
                            "--capacity 1792MiB --alloc-conf expandable_segments:True", dir / "contrast").is_null());
  const std::string summary = read_text(dir / "out" / "summary.md");
  EXPECT_NE(summary.find("| OOM kind | fragmentation | fragmentation |"), std::string::npos) << summary;
  EXPECT_NE(summary.find("| under caching[expandable_segments:True] | no OOM up to the request | no OOM |"),
            std::string::npos) << summary;
  EXPECT_NE(summary.find("**hole "), std::string::npos) << summary;
  EXPECT_NE(summary.find("no single allocation (with its free) can be removed"), std::string::npos) << summary;
  const std::string svg = read_text(dir / "out" / "oom_block_map.svg");
  EXPECT_NE(svg.find("fragmentation OOM"), std::string::npos);
  // Deterministic: the same command gives the same files.
  r = run_gpumembench("reduce -q --trace " + trace + " --allocator caching --capacity 1792MiB "
                      "--contrast-alloc-conf expandable_segments:True --output " + (dir / "again").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(read_text(dir / "again" / "reduced_trace.csv"), read_text(dir / "out" / "reduced_trace.csv"));
  EXPECT_EQ(read_text(dir / "again" / "repro_torch.py"), read_text(dir / "out" / "repro_torch.py"));
  fs::remove_all(dir);
}

// An --output folder that holds files is refused before the search (exit 2, nothing touched), as a
// run's is; --overwrite replaces reduce's own files, removes a stale one (repro_torch.py of a
// caching reduce, now cuda_malloc's) and leaves the others.
TEST(Reduce, AFolderThatHoldsFilesIsRefusedUnlessOverwrite) {
  auto dir = temp_dir("reduce_folder");
  const std::string trace = source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv");
  const std::string base = "reduce -q --trace " + trace + " --output " + (dir / "out").string();
  auto r = run_gpumembench(base + " --allocator caching --capacity 1792MiB");
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_TRUE(fs::exists(dir / "out" / "repro_torch.py"));
  write_text(dir / "out" / "notes.txt", "precious");
  const std::string summary = read_text(dir / "out" / "summary.md");
  const std::string loud = "reduce --trace " + trace + " --output " + (dir / "out").string();  // without -q
  r = run_gpumembench(loud + " --allocator cuda_malloc --capacity 1GiB");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("the folder holds files ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", ...); reduce writes into a new or empty folder, or with --overwrite replaces its own files"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("format native_csv"), std::string::npos) << "refused before the trace is read: " << r.out;
  EXPECT_EQ(r.out.find("reducing"), std::string::npos) << "refused before the search: " << r.out;
  EXPECT_EQ(read_text(dir / "out" / "summary.md"), summary);
  r = run_gpumembench(base + " --allocator cuda_malloc --capacity 1GiB --overwrite");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(read_text(dir / "out" / "notes.txt"), "precious");
  EXPECT_FALSE(fs::exists(dir / "out" / "repro_torch.py")) << "the caching reduce's script, stale now";
  EXPECT_NE(read_text(dir / "out" / "summary.md"), summary);
  EXPECT_NE(read_text(dir / "out" / "summary.md").find("cuda_malloc"), std::string::npos);
  r = run_gpumembench("reduce -q --trace " + trace + " --allocator caching --capacity 1792MiB --overwrite");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--overwrite applies to --output DIR"), std::string::npos) << r.out;
  // A file, or a link to nothing, where the folder would be: refused before the search too.
  write_text(dir / "afile", "x");
  fs::create_symlink(dir / "nothing", dir / "dangling");
  for (const char* name : {"afile", "dangling"}) {
    r = run_gpumembench("reduce --trace " + trace + " --allocator caching --capacity 1792MiB --output " +
                        (dir / name).string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(std::string(name) == "afile" ? ": a file, not a folder" : ": a link to no folder, not a folder"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("reducing"), std::string::npos) << r.out;
  }
  fs::remove_all(dir);
}

// snap_default at 12 GiB: its first OOM (event 8,606) fits by the trace up to it (a fragmentation
// OOM there, which the reproducer keeps), while the whole run needs 16.67 GiB, so replay's tables
// call it a capacity OOM. reduce says both, on its line and in summary.md (it said only
// "fragmentation", the opposite advice to replay's).
TEST(Reduce, SaysWhereTheRunsTablesJudgeTheOomOtherwise) {
  auto dir = temp_dir("reduce_kinds");
  const std::string snap = source_path("tests/data/torch_snapshots/snap_default.pickle.gz");
  auto r = run_gpumembench("replay --device sim -q --allocator caching --capacity 12GiB --trace " + snap);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| caching | capacity | needs at least 16.67 GiB"), std::string::npos) << r.out;
  r = run_gpumembench("reduce -q --allocator caching --capacity 12GiB --trace " + snap + " --output " +
                      (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("fragmentation OOM at event 8,606 (775.4 MiB request) (the run's tables call it a capacity OOM: "
                       "the events after it need more) reduced from 63,111 events"),
            std::string::npos)
      << r.out;
  EXPECT_NE(read_text(dir / "out" / "summary.md")
                .find("| OOM kind | fragmentation at the request; the run calls it capacity (the events after it need "
                      "more than the capacity) | fragmentation |"),
            std::string::npos);
  // A recording that ran out of memory on its own card, reduced on a whole H200: no OOM, and the
  // error says where the recorded ones came from.
  r = run_gpumembench("reduce -q --allocator caching --trace " +
                      source_path("tests/data/torch_snapshots/snap_oom_cap16g.pickle.gz") + " --output " +
                      (dir / "none").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("nothing to reduce; the recorded run had 2 failed allocation(s): give the card it ran on "
                       "(--capacity) or its memory fraction's limit (--memory-limit)"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir / "none"));
  // cuda_malloc takes no memory limit: the hint names the card only. And another error (a
  // contrast that runs out too) gets no hint: the trace did run out of memory.
  r = run_gpumembench("reduce -q --allocator cuda_malloc --trace " +
                      source_path("tests/data/torch_snapshots/snap_oom_cap16g.pickle.gz") + " --output " +
                      (dir / "none").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("give the card it ran on (--capacity)\n"), std::string::npos) << r.out;
  write_text(dir / "rmm.csv", "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.000001,allocate,0x7f0000000000,"
                              "214748364800,0x0\n1,00:00:00.000002,allocate failure,(nil),1024,0x0\n");
  r = run_gpumembench("reduce -q --allocator caching --contrast-alloc-conf expandable_segments:True --trace " +
                      (dir / "rmm.csv").string() + " --output " + (dir / "none").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("no contrast to keep"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("the recorded run had"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// configs/dynamic_seq.yaml's fragmentation OOM (default caching at 24 GiB, step 223, event
// 490,784; 490,785 events up to it) comes down to a few dozen events at most that still OOM at
// 24 GiB, as a fragmentation OOM at their last event, and run under expandable_segments:True.
TEST(Reduce, DynamicSeqOomComesDownToAFewEvents) {
  auto dir = temp_dir("reduce_dyn");
  auto r = run_gpumembench("reduce -q --config " + source_path("configs/dynamic_seq.yaml") +
                           " --steps 224 --allocator caching --capacity 24GiB --contrast-alloc-conf "
                           "expandable_segments:True --max-seconds 0 --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("fragmentation OOM at event 490,784 (1.01 GiB request) reduced from 492,464 events (490,785 "
                       "up to the OOM) to"),
            std::string::npos) << r.out;
  const gmb::Trace reduced = gmb::read_trace((dir / "out" / "reduced_trace.csv").string());
  expect_well_formed(reduced.ops);
  EXPECT_LE(reduced.ops.size(), 300u);
  const json oom = cli_first_oom(dir / "out" / "reduced_trace.csv", "--capacity 24GiB", dir / "replay");
  ASSERT_FALSE(oom.is_null());
  EXPECT_EQ(oom["kind"], "fragmentation");
  EXPECT_EQ(oom["event"], reduced.ops.size() - 1);
  EXPECT_EQ(oom["requested_bytes"], 1089571760u);
  EXPECT_TRUE(cli_first_oom(dir / "out" / "reduced_trace.csv", "--capacity 24GiB --alloc-conf expandable_segments:True",
                            dir / "contrast").is_null());
  fs::remove_all(dir);
}

// The script is valid Python and says what it needs: without PyTorch or a GPU it exits 3 with a
// message (on the GPU machine it replays the events; scripts/gpu_reproducers.sh).
TEST(Reduce, ReproScriptRunsAndSaysWhatItNeeds) {
  auto dir = temp_dir("reduce_py");
  auto r = run_gpumembench("reduce -q --trace " + source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv") +
                           " --allocator caching --capacity 1792MiB --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string py = read_text(dir / "out" / "repro_torch.py");
  EXPECT_NE(py.find("LIMIT_BYTES = 1879048192"), std::string::npos);
  EXPECT_NE(py.find("caching_allocator_alloc"), std::string::npos);
  // Without a GPU or PyTorch (CI) the script must say so and exit 3, never crash; where both are
  // there (the GPU machine) it replays the events and must OOM where gpumembench predicted (1).
  const std::string cmd = "cd " + (dir / "out").string() + " && python3 repro_torch.py > log.txt 2>&1; echo $? > rc.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string log = read_text(dir / "out" / "log.txt");
  if (log.find("REPRODUCED") != std::string::npos) {
    EXPECT_EQ(read_text(dir / "out" / "rc.txt"), "1\n") << log;
    EXPECT_NE(log.find("predicted event 22"), std::string::npos) << log;
  } else {
    EXPECT_EQ(read_text(dir / "out" / "rc.txt"), "3\n") << log;
  }
  fs::remove_all(dir);
}

// The same input gives the same reduced trace, and a capacity OOM stays a capacity OOM: three
// 1.5 GiB tensors on a 4 GiB device come down to the two live ones merged into one block (more
// than 4 GiB - 1.5 GiB) and the request.
TEST(Reduce, IsDeterministicAndKeepsACapacityOomACapacityOom) {
  const gmb::Bytes big = 3 * GiB / 2;
  std::vector<Op> input = ops_of({{'a', 0, 64 * MiB}, {'a', 1, big}, {'f', 0, 0}, {'a', 2, 100 * MiB},
                                  {'a', 3, big - 4096}, {'f', 2, 0}, {'a', 4, big}, {'a', 5, 8 * MiB}});
  gmb::ReduceSettings s;
  s.target = {"caching", {}, 4 * GiB};
  s.max_seconds = 0;
  const gmb::ReduceResult a = gmb::reduce_oom(input, s);
  const gmb::ReduceResult b = gmb::reduce_oom(input, s);
  EXPECT_EQ(a.oom_event, 6u);
  EXPECT_EQ(a.kind, gmb::OomKind::Capacity);
  ASSERT_EQ(a.ops.size(), 2u);
  expect_well_formed(a.ops);
  EXPECT_GT(a.ops[0].bytes, 4 * GiB - big);
  EXPECT_EQ(a.ops[1].bytes, big);
  ASSERT_EQ(b.ops.size(), a.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].kind, b.ops[i].kind);
    EXPECT_EQ(a.ops[i].id, b.ops[i].id);
    EXPECT_EQ(a.ops[i].bytes, b.ops[i].bytes);
  }
  EXPECT_EQ(a.replays, b.replays);
  EXPECT_TRUE(a.stopped_by.empty());
}

// A budget stops the search early and what is left is still a reproducer; no OOM at all, a flag
// of another allocator or an output folder that cannot be made is a clear error, exit 2.
TEST(Reduce, ABudgetStopsEarlyAndNoOomIsAnError) {
  auto dir = temp_dir("reduce_budget");
  const std::string trace = source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv");
  auto r = run_gpumembench("reduce -q --trace " + trace + " --allocator caching --capacity 1792MiB --max-replays 5 "
                           "--output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("stopped by the replay limit"), std::string::npos) << r.out;
  const gmb::Trace reduced = gmb::read_trace((dir / "out" / "reduced_trace.csv").string());
  expect_well_formed(reduced.ops);
  EXPECT_EQ(cli_first_oom(dir / "out" / "reduced_trace.csv", "--capacity 1792MiB", dir / "replay")["event"],
            reduced.ops.size() - 1);
  r = run_gpumembench("reduce -q --trace " + trace + " --allocator caching --capacity 2GiB --output " +
                      (dir / "none").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(trace + ": the trace runs without an OOM under caching at 2.00 GiB: nothing to reduce"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir / "none"));
  r = run_gpumembench("reduce -q --trace " + trace + " --allocator cuda_malloc --alloc-conf x --capacity 2GiB");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("apply to the caching allocator, not 'cuda_malloc'"), std::string::npos) << r.out;
  // An output folder that cannot be made: exit 2, the folder named, nothing left behind.
  write_text(dir / "a_file", "x");
  r = run_gpumembench("reduce -q --trace " + trace + " --allocator caching --capacity 1792MiB --output " +
                      (dir / "a_file" / "out").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("cannot write the reproducer into " + (dir / "a_file" / "out").string()), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir / "a_file" / "out.tmp-reduce"));
  fs::remove_all(dir);
}

// A trace needs no --capacity, as in `replay` on sim: the recording device's memory where the
// trace says it, else an H200's whole memory, said in a note. The real fragmentation OOM PyTorch
// hit under an 8.25 GiB fraction (snap_stream_retry8_25g) reduces at that default to 12 events
// whose last OOMs; a limit above the capacity is refused before anything is written.
TEST(Reduce, ATraceReducesAtTheCapacityReplayWouldUse) {
  auto dir = temp_dir("reduce_default_capacity");
  const std::string trace = source_path("tests/data/torch_snapshots/snap_stream_retry8_25g.pickle.gz");
  // (An output folder given with a trailing slash, as README's examples write it, is that folder.)
  auto r = run_gpumembench("reduce --trace " + trace + " --allocator caching --memory-limit 8858370048 --output " +
                           (dir / "out").string() + "/");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("capacity: 139.80 GiB, the simulated device's default (an H200's whole memory; --capacity "
                       "replaces it)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fragmentation OOM at event 5,726 (945.3 MiB request) reduced from 6,676 events"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir / "out" / ".tmp-reduce"));
  for (const char* file : {"reduced_trace.csv", "oom_block_map.svg", "summary.md", "repro_torch.py"})
    EXPECT_TRUE(fs::exists(dir / "out" / file)) << file;
  const gmb::Trace reduced = gmb::read_trace((dir / "out" / "reduced_trace.csv").string());
  expect_well_formed(reduced.ops);
  EXPECT_EQ(cli_first_oom(dir / "out" / "reduced_trace.csv", "--memory-limit 8858370048", dir / "replay")["event"],
            reduced.ops.size() - 1);
  r = run_gpumembench("reduce -q --trace " + trace + " --allocator caching --capacity 8GiB --memory-limit 9GiB --output " +
                      (dir / "too_big").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--memory-limit: 9.00 GiB is more than the device's 8.00 GiB"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "too_big"));
  fs::remove_all(dir);
}
