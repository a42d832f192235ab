// RMM memory event logs (logging_resource_adaptor's CSV): every stream replayed, pointers become
// dense reused ids, `allocate failure` rows are the recorded OOMs, bad rows name file:line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "workloads/trace_source.h"

namespace gmb {
namespace {

namespace fs = std::filesystem;
using testing::run_gpumembench;
using testing::temp_dir;
using testing::write_text;

const std::string kHeader = "Thread,Time,Action,Pointer,Size,Stream\n";

std::vector<Op> read_all(const std::string& path, TraceMeta& meta) {
  auto src = open_trace(path);
  std::vector<Op> ops;
  while (src->read(ops, 2) > 0) {
  }
  meta = src->meta();
  return ops;
}

TEST(RmmLog, StreamsPointersAndRecordedFailures) {
  auto dir = temp_dir("rmm");
  write_text(dir / "log.csv", kHeader +
                                  "140573312345856,08:28:31.528491,allocate,0x7f8a40000000,1024,0x0\n"
                                  "140573312345856,08:28:31.528500,allocate,0x7f8a40000400,2048,0x55d0c6e3a2f0\n"
                                  "140573312345857,08:28:31.528510,allocate failure,(nil),1099511627776,0x55d0c6e3a2f0\n"
                                  "140573312345856,08:28:31.528520,free,0x7f8a40000000,1024,0x0\n"
                                  "140573312345856,08:28:31.528530,allocate,0x7f8a40000000,512,7f00aa000010\n"
                                  "140573312345856,08:28:31.528540,free,0x7f8a40000400,2048,0x55d0c6e3a2f0\n");
  TraceMeta meta;
  auto ops = read_all((dir / "log.csv").string(), meta);
  EXPECT_EQ(meta.format, "rmm_log");
  // The failure is replayed as an attempt of its size, freed right away (read two ops at a time:
  // the free comes with the next read).
  ASSERT_EQ(ops.size(), 7u);
  EXPECT_EQ(ops[0].kind, Op::Kind::Alloc);
  EXPECT_EQ(ops[0].id, 0u);
  EXPECT_EQ(ops[0].bytes, 1024u);
  EXPECT_EQ(ops[0].stream, 0);
  EXPECT_EQ(ops[1].id, 1u);
  EXPECT_EQ(ops[1].stream, 1);
  EXPECT_EQ(ops[2].kind, Op::Kind::Alloc);
  EXPECT_EQ(ops[2].id, 2u);
  EXPECT_EQ(ops[2].bytes, 1099511627776u);
  EXPECT_EQ(ops[2].stream, 1);
  EXPECT_EQ(ops[2].source_line, 4u);
  EXPECT_EQ(ops[3].kind, Op::Kind::Free);
  EXPECT_EQ(ops[3].id, 2u);
  EXPECT_EQ(ops[4].kind, Op::Kind::Free);
  EXPECT_EQ(ops[4].id, 0u);
  EXPECT_EQ(ops[4].source_line, 5u);
  EXPECT_EQ(ops[5].id, 0u) << "the freed id is reused";
  EXPECT_EQ(ops[5].stream, 2) << "a third stream, in order of appearance";
  EXPECT_EQ(ops[6].id, 1u);
  EXPECT_TRUE(meta.records_ooms);
  EXPECT_EQ(meta.recorded_ooms, 1u);
  ASSERT_EQ(meta.recorded_oom_events.size(), 1u);
  EXPECT_EQ(meta.recorded_oom_events[0], 2u);  // the attempt, after two replayed events
  fs::remove_all(dir);
}

// RMM answers a request of 0 bytes with a null pointer (and the caching allocator's export logs
// it so): such rows allocate nothing, and the log replays and reads back. A stream named only by
// frees is no stream of the replay: a free is on its allocation's stream.
TEST(RmmLog, ZeroBytesAtNilAreNothingAndAFreesStreamIsItsAllocations) {
  auto dir = temp_dir("rmm");
  write_text(dir / "z.csv", kHeader +
                                "1,0,allocate,(nil),0,0x0\n"
                                "1,0,allocate,0x3000,100,0x0\n"
                                "1,0,free,(nil),0,0x0\n"
                                "1,0,free,0x3000,100,0x7f\n");
  TraceMeta meta;
  auto ops = read_all((dir / "z.csv").string(), meta);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].kind, Op::Kind::Alloc);
  EXPECT_EQ(ops[0].source_line, 3u);
  EXPECT_EQ(ops[1].kind, Op::Kind::Free);
  EXPECT_EQ(ops[1].stream, 0) << "the free is on its allocation's stream";
  ASSERT_FALSE(meta.notes.empty());
  EXPECT_EQ(meta.notes.back(), "2 rows allocate or free 0 bytes at (nil): nothing allocated, not replayed");
  for (const auto& note : meta.notes) EXPECT_EQ(note.find("stream"), std::string::npos) << note;

  // A log with requests of 0 bytes, exported by the caching allocator and read back.
  write_text(dir / "zero.csv", kHeader + "1,0,allocate,0x1000,0,0x0\n1,0,allocate,0x3000,100,0x0\n"
                                         "1,0,free,0x1000,0,0x0\n1,0,free,0x3000,100,0x0\n");
  auto r = run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "zero.csv").string() +
                           " --export-rmm-log " + (dir / "x.csv").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(testing::read_text(dir / "x.csv").find(",allocate,(nil),0,"), std::string::npos);
  auto back = run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "x.csv").string());
  EXPECT_EQ(back.status, 0) << back.out;
  EXPECT_NE(back.out.find("| caching | 2.0 MiB | 0.0 MiB |"), std::string::npos) << back.out;
  fs::remove_all(dir);
}

TEST(RmmLog, ReplaySaysHowManyAllocationsFailedInTheRecordedRun) {
  auto dir = temp_dir("rmm");
  write_text(dir / "log.csv", kHeader +
                                  "1,08:28:31.528491,allocate,0x7f8a40000000,1073741824,0x0\n"
                                  "1,08:28:31.528510,allocate failure,(nil),3221225472,0x0\n"
                                  "1,08:28:31.528511,allocate,0x7f8b40000000,1073741824,0x0\n"
                                  "1,08:28:31.528520,free,0x7f8a40000000,1073741824,0x0\n");
  auto r = run_gpumembench("replay --device sim --capacity 3GiB --allocator caching --trace " +
                           (dir / "log.csv").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("format rmm_log"), std::string::npos) << r.out;
  // The 3 GiB attempt fails in the replay as it did in the recorded run.
  EXPECT_NE(r.out.find("recorded run: 1 failed allocation (event 1); replayed: 1 OOM (first at event 1)"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

// A config run that stops at its first OOM (on_oom: stop) before the reader reaches the log's
// end: the recorded failures are counted over the part read, and results.json says so
// (whole_trace false). A PyTorch snapshot is parsed whole before its first op, so its count is
// the whole recording's even when the replay stops early (whole_trace true).
TEST(RmmLog, ARunStoppedEarlySaysWhichPartItsRecordedFailuresCover) {
  auto dir = temp_dir("rmm_stop");
  // 1 GiB live from the start, then 40,000 small allocate/free pairs, a recorded failure at the
  // end: on a 1 GiB card the first small allocation fails, long before the reader gets there.
  std::string log = kHeader + "1,0,allocate,0x100000000,1073741824,0x0\n";
  for (int i = 0; i < 40000; ++i)
    log += "1,0,allocate,0x200000000,4096,0x0\n1,0,free,0x200000000,4096,0x0\n";
  log += "1,0,allocate failure,(nil),3221225472,0x0\n";
  write_text(dir / "log.csv", log);
  auto run_stopped = [&](const std::string& trace, const std::string& capacity) {
    write_text(dir / "c.yaml", "name: stopped\ndevice: {capacity: [" + capacity + "]}\nallocators: [caching]\n"
                               "workloads:\n  - trace: {path: " + trace + "}\nrun: {on_oom: stop}\n");
    fs::remove_all(dir / "out");
    auto r = run_gpumembench("--device sim -q --config " + (dir / "c.yaml").string() + " --output " +
                             (dir / "out").string());
    EXPECT_EQ(r.status, 0) << r.out;
    return nlohmann::json::parse(testing::read_text(dir / "out" / "results.json"))["cases"][0];
  };
  const auto rmm = run_stopped((dir / "log.csv").string(), "1GiB");
  EXPECT_EQ(rmm["ooms"], 1);
  EXPECT_EQ(rmm["events"], 2) << "stopped at the first small allocation";
  EXPECT_EQ(rmm["recorded_ooms"]["count"], 0) << "the failure at the log's end was not read";
  EXPECT_EQ(rmm["recorded_ooms"]["whole_trace"], false);

  const auto snap = run_stopped(testing::source_path("tests/data/torch_snapshots/snap_oom_cap16g.pickle.gz"), "16GiB");
  EXPECT_EQ(snap["ooms"], 1);
  EXPECT_EQ(snap["events"], 16112) << "stopped at the recorded run's first OOM";
  EXPECT_EQ(snap["recorded_ooms"]["count"], 2);
  EXPECT_EQ(snap["recorded_ooms"]["events"], nlohmann::json::parse("[16111, 59591]"));
  EXPECT_EQ(snap["recorded_ooms"]["whole_trace"], true);
  fs::remove_all(dir);
}

TEST(RmmLog, BadRowsNameTheLineAndWhatWasExpected) {
  auto dir = temp_dir("rmm");
  const std::string ok = "1,08:28:31.5,allocate,0x7f8a40000000,1024,0x0\n";
  struct Case {
    std::string name, row, expected;
  } cases[] = {
      {"ptr.csv", "1,08:28:31.6,allocate,0xZZ12,1024,0x0\n",
       "ptr.csv:3: pointer '0xZZ12' is not a hexadecimal address (expected e.g. 0x7f2e4a000000, or (nil))"},
      {"act.csv", "1,08:28:31.6,reallocate,0x7f8a40001000,1024,0x0\n",
       "act.csv:3: unknown action 'reallocate' (valid: allocate, free, allocate failure)"},
      {"free.csv", "1,08:28:31.6,free,0x7f8a40001000,1024,0x0\n",
       "free.csv:3: free of unknown pointer 0x7f8a40001000 (never allocated, or already freed)"},
      {"dup.csv", ok, "dup.csv:3: allocate of pointer 0x7f8a40000000 which is already allocated"},
      {"size.csv", "1,08:28:31.6,allocate,0x7f8a40001000,-5,0x0\n", "size.csv:3: size '-5' is not a non-negative integer"},
      {"stream.csv", "1,08:28:31.6,allocate,0x7f8a40001000,5,stream1\n", "stream.csv:3: stream 'stream1' is not a hexadecimal"},
      {"short.csv", "1,08:28:31.6,allocate,0x7f8a40001000\n", "short.csv:3: expected 6 fields"},
      {"big.csv", "1,08:28:31.6,allocate,0x7f8a40001000,18446744073709551616,0x0\n",
       "big.csv:3: size '18446744073709551616' is larger than 2^64-1 bytes"},
      {"null.csv", "1,08:28:31.6,allocate,(nil),64,0x0\n",
       "null.csv:3: allocate of 64 bytes at a null pointer (a failed allocation is logged as 'allocate failure'; only "
       "a request of 0 bytes may be answered with (nil))"},
  };
  // A comment before the header is skipped, as the format's detection skips it.
  write_text(dir / "comment.csv", "# from the service's pool\n" + kHeader + ok);
  auto commented = run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "comment.csv").string());
  EXPECT_EQ(commented.status, 0) << commented.out;
  for (const auto& c : cases) {
    write_text(dir / c.name, kHeader + ok + c.row);
    auto r = run_gpumembench("replay --device sim --allocator caching --trace " + (dir / c.name).string());
    EXPECT_EQ(r.status, 2) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << c.name << ": " << r.out;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gmb
