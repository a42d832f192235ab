// Input the command line and configs used to take without a word, each now a usage error (exit 2,
// nothing written): a value left empty, a second YAML document, a bad name after "all" in
// --metrics, a --baseline that merge does not have. `plan` lists the cases of the shard a run
// would take from the launcher's environment. An export to a FIFO or a device (/dev/null) writes
// through it instead of replacing it with a file.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <sstream>
#include <string>
#include <vector>

#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace gmb::testing;

namespace {

const std::string kHole = source_path("configs/hole_pattern.yaml");

std::size_t lines_of(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(CliStrictness, AnEmptyValueIsAUsageErrorNotTheDefault) {
  auto dir = temp_dir("empty_values");
  const std::string out = (dir / "out").string();
  struct Case {
    std::string args, flag;
  };
  for (const Case& c : {Case{"--config " + kHole + " --device sim -q --capacity '' --output " + out, "--capacity"},
                        Case{"--config " + kHole + " --device sim -q --format '' --output " + out, "--format"},
                        Case{"--config " + kHole + " --device sim -q --metrics '' --output " + out, "--metrics"},
                        Case{"--config " + kHole + " --device sim -q --baseline '' --output " + out, "--baseline"},
                        Case{"--config " + kHole + " --device sim -q --output ''", "--output"},
                        Case{"plan --config " + kHole + " --device sim --capacity ''", "--capacity"},
                        Case{"frontier --config " + kHole + " --device sim -q --lo '' --output " + out, "--lo"}}) {
    SCOPED_TRACE(c.args);
    auto r = run_gpumembench(c.args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(c.flag + ": an empty value"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(out));
  }
  // An empty alloc_conf is PyTorch's defaults, a value of its own.
  auto r = run_gpumembench("replay --device sim -q --trace " +
                           source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv") +
                           " --allocator caching --alloc-conf '' --capacity 8GiB");
  EXPECT_EQ(r.status, 0) << r.out;
  fs::remove_all(dir);
}

TEST(CliStrictness, ASecondYamlDocumentIsAnErrorWithItsLine) {
  auto dir = temp_dir("two_docs");
  write_text(dir / "c.yaml",
             "name: c\nallocators: [caching]\nworkloads:\n  - hole_pattern: {sizes: [1MiB], free: [], probe: 1MiB}\n"
             "---\nfoo: bar\n");
  auto r = run_gpumembench("--config " + (dir / "c.yaml").string() + " --device sim -q --output " + (dir / "o").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("c.yaml:6:1: a second YAML document"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "o"));
  // A document marker before the only document, or one closing it, is still one config.
  write_text(dir / "d.yaml",
             "---\nname: d\nallocators: [caching]\nworkloads:\n  - hole_pattern: {sizes: [1MiB], free: [], probe: 1MiB}\n"
             "---\n");
  r = run_gpumembench("--config " + (dir / "d.yaml").string() + " --device sim -q --output " + (dir / "o").string());
  EXPECT_EQ(r.status, 0) << r.out;
  fs::remove_all(dir);
}

// A lone ',' stops yaml-cpp's parser where it is: it hands out the same empty document there for
// ever (YAML::LoadAll never returned and filled memory until the process was killed; fuzz_config
// found it). It is a syntax error at that place, in the first document or a later one.
TEST(CliStrictness, TextTheYamlParserCannotPassIsASyntaxError) {
  auto dir = temp_dir("stuck_yaml");
  const std::pair<std::string, std::string> cases[] = {
      {",", "c.yaml:1:1: YAML syntax error: the text from here cannot be read as YAML"},
      {"name: c\n---\n,\n", "c.yaml:3:1: YAML syntax error: the text from here cannot be read as YAML"},
  };
  for (const auto& [text, error] : cases) {
    SCOPED_TRACE(text);
    write_text(dir / "c.yaml", text);
    auto r = run_gpumembench("--config " + (dir / "c.yaml").string() + " --device sim -q --output " + (dir / "o").string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(error), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir / "o"));
  }
  fs::remove_all(dir);
}

// Keys that used to take anything: an empty list of formats or metrics gave the defaults without
// a word, and a description could be a list or a map.
TEST(CliStrictness, EmptyOutputListsAndADescriptionThatIsNotTextAreErrors) {
  auto dir = temp_dir("output_lists");
  const std::string body =
      "allocators: [caching]\nworkloads:\n  - hole_pattern: {sizes: [1MiB], free: [], probe: 1MiB}\n";
  const std::pair<std::string, std::string> cases[] = {
      {"output: {formats: []}\n", "c.yaml:4:19: key 'output.formats': an empty list: name at least one (valid: "},
      {"output: {metrics: []}\n", "c.yaml:4:19: key 'output.metrics': an empty list: name at least one (valid: "},
      {"description: [a, b]\n", "c.yaml:4:14: key 'description': expected a string"},
  };
  for (const auto& [extra, error] : cases) {
    SCOPED_TRACE(extra);
    write_text(dir / "c.yaml", body + extra);
    auto r = run_gpumembench("--config " + (dir / "c.yaml").string() + " --device sim -q --output " + (dir / "o").string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(error), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir / "o"));
  }
  // A description left empty is no description.
  write_text(dir / "c.yaml", body + "description:\n");
  auto r = run_gpumembench("--config " + (dir / "c.yaml").string() + " --device sim -q --output " + (dir / "o").string());
  EXPECT_EQ(r.status, 0) << r.out;
  fs::remove_all(dir);
}

// Counts and seconds the commands share: -1 steps wrapped to 2^64 - 1 in reduce, a count past
// 2^64 - 1 was capped without a word, and reduce --max-seconds took nan and inf. And a flag the
// command would ignore: frontier --capacity in a capacity search.
TEST(CliStrictness, StepCountsSecondsAndIgnoredFlagsAreUsageErrors) {
  auto dir = temp_dir("counts");
  const std::pair<std::string, std::string> cases[] = {
      {"--config " + kHole + " --device sim --steps 18446744073709551616",
       "--steps: '18446744073709551616' is larger than the largest step count, 18446744073709551615"},
      {"reduce --config " + kHole + " --allocator caching --steps -1",
       "--steps: '-1' is not a step count (1 or more, in decimal without leading zeros)"},
      {"reduce --config " + kHole + " --allocator caching --steps 99999999999999999999",
       "--steps: '99999999999999999999' is larger than the largest step count"},
      {"reduce --config " + kHole + " --allocator caching --max-seconds nan",
       "--max-seconds: 'nan' is not a number of seconds (0 or more, e.g. 120 or 2.5)"},
      {"reduce --config " + kHole + " --allocator caching --max-seconds inf", "--max-seconds: 'inf' is not a number"},
      {"merge --config " + kHole + " --steps 0 " + dir.string(), "--steps: '0' is not a step count"},
      {"--config " + kHole + " --device sim --steps 010", "--steps: '010' is not a step count"},
      {"reduce --config " + kHole + " --allocator caching --workload -1", "--workload: '-1' is not a whole number"},
      {"reduce --config " + kHole + " --allocator caching --max-replays -1", "--max-replays: '-1' is not a whole number"},
      {"frontier --config " + kHole + " --device sim --capacity 8GiB",
       "--capacity goes with --param batch or seq_len; a capacity search takes its range from --lo and --hi"},
      {"replay --device sim --allocator caching --trace " + kHole + " --trace-device -1",
       "--trace-device: '-1' is not a device number (0 or more, in decimal without leading zeros)"},
      {"reduce --trace " + kHole + " --allocator caching --trace-device 99999999999",
       "--trace-device: '99999999999' is larger than the largest device number, 2147483647"},
  };
  for (const auto& [args, error] : cases) {
    SCOPED_TRACE(args);
    auto r = run_gpumembench(args + " -q --output " + (dir / "o").string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(error), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(dir / "o"));
  }
  // The largest count is a count: every step.
  auto r = run_gpumembench("--config " + kHole + " --device sim --steps 18446744073709551615 -q --output " +
                           (dir / "o").string());
  EXPECT_EQ(r.status, 0) << r.out;
  fs::remove_all(dir);
}

TEST(CliStrictness, MetricsAreCheckedAfterAll) {
  for (const std::string m : {"gmlake,all,bogus", "all,bogus", "all,"}) {
    SCOPED_TRACE(m);
    auto dir = temp_dir("metrics_bad");
    auto r = run_gpumembench("--config " + kHole + " --device sim -q --metrics " + m + " --output " + (dir / "o").string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_FALSE(fs::exists(dir / "o"));
    fs::remove_all(dir);
    EXPECT_NE(r.out.find("--metrics: '"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("is not a metric family (valid: gmlake, stalloc, tf, memory_viz, all)"), std::string::npos)
        << r.out;
  }
  auto dir = temp_dir("metrics_all");
  auto r = run_gpumembench("--config " + kHole + " --device sim -q --metrics all --format json --output " +
                           (dir / "o").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(read_text(dir / "o" / "results.json").find("memory_viz_external_free_bytes"), std::string::npos);
  fs::remove_all(dir);
}

TEST(CliStrictness, MergeChecksItsBaselineAsARunDoes) {
  auto dir = temp_dir("merge_baseline");
  for (int i = 0; i < 2; ++i) {
    auto r = run_gpumembench("--config " + kHole + " --device sim -q --shard " + std::to_string(i) + "/2 --output " +
                             (dir / ("s" + std::to_string(i))).string());
    ASSERT_EQ(r.status, 0) << r.out;
  }
  const std::string inputs = (dir / "s0").string() + " " + (dir / "s1").string();
  auto r = run_gpumembench("merge " + inputs + " --output " + (dir / "m").string() + " --baseline nope");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--baseline: 'nope' is not an allocator of the merged runs (valid: cuda_malloc, caching, "
                       "caching[expandable_segments:True], cuda_mempool)"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir / "m"));
  r = run_gpumembench("merge " + inputs + " --output " + (dir / "m").string() + " --baseline cuda_malloc");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(read_text(dir / "m" / "results.md").find("| vs cuda_malloc |"), std::string::npos);
  fs::remove_all(dir);
}

TEST(CliStrictness, PlanListsTheShardTheLaunchersEnvironmentGives) {
  auto all = run_gpumembench("plan --config " + kHole + " --device sim");
  ASSERT_EQ(all.status, 0) << all.out;
  auto one = run_gpumembench_with_prefix("SLURM_PROCID=1 SLURM_NTASKS=2 ", "plan --config " + kHole + " --device sim");
  ASSERT_EQ(one.status, 0) << one.out;
  auto flag = run_gpumembench("plan --config " + kHole + " --device sim --shard 1/2");
  EXPECT_EQ(one.out, flag.out);
  EXPECT_EQ(lines_of(one.out), lines_of(all.out) / 2);
  auto bad = run_gpumembench_with_prefix("SLURM_ARRAY_TASK_ID=abc SLURM_ARRAY_TASK_COUNT=2 ",
                                         "plan --config " + kHole + " --device sim");
  EXPECT_EQ(bad.status, 2) << bad.out;
}

TEST(CliStrictness, ExportSnapshotToAFifoWritesThroughItInsteadOfReplacingIt) {
  auto dir = temp_dir("export_fifo");
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Read without blocking (a FIFO nobody writes to reads as its end), until the command is done:
  // the test ends whether or not the FIFO is written.
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(fd, 0);
  std::string got;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        got.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if ((n == 0 && done) || (n < 0 && errno != EAGAIN)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  auto r = run_gpumembench_bounded("replay --device sim -q --trace " +
                                   source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv") +
                                   " --allocator caching --capacity 8GiB --export-snapshot " + fifo.string());
  done = true;
  reader.join();
  ::close(fd);
  EXPECT_EQ(r.status, 0) << r.out;
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
  ASSERT_GE(got.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(got[0]), 0x80);  // a pickle's PROTO opcode
  EXPECT_EQ(got.back(), '.');                           // and its STOP
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "pipe");  // no temporary left
  fs::remove_all(dir);
}

// A stream id the caching allocator cannot key (above 65535) is the trace's error, with its line,
// not an internal error of the allocator in the middle of the replay.
TEST(CliStrictness, AStreamIdAbove65535IsATraceErrorWithItsLine) {
  auto dir = temp_dir("stream_id");
  std::string csv = "action,id,bytes,stream\n";
  for (int i = 0; i < 300000; ++i) csv += "alloc," + std::to_string(i) + ",512,65535\nfree," + std::to_string(i) + ",,65535\n";
  csv += "alloc,1,512,65536\n";  // line 600,002: past the first chunks, in the fast path
  write_text(dir / "t.csv", csv);
  for (const char* allocator : {"caching", "vmm_stitch", "cuda_malloc"}) {
    SCOPED_TRACE(allocator);
    auto r = run_gpumembench("replay --device sim -q --capacity 8GiB --trace " + (dir / "t.csv").string() +
                             " --allocator " + allocator + " --output " + (dir / "o").string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find("t.csv:600002: stream '65536' is not a stream id (valid: 0 to 65535)"), std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(dir / "o"));
  }
  fs::remove_all(dir);
}

// A folder refused (it holds other files) keeps only what it held: no lock file of ours. replay
// has no --resume, so its message does not offer one.
TEST(CliStrictness, ARefusedOutputFolderIsLeftAsItWas) {
  auto dir = temp_dir("refused_folder");
  fs::create_directories(dir / "o");
  write_text(dir / "o" / "mine.txt", "keep\n");
  auto r = run_gpumembench("replay --device sim -q --capacity 8GiB --trace " +
                           source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv") +
                           " --allocator caching --output " + (dir / "o").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is not empty (it holds mine.txt)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--resume"), std::string::npos) << r.out;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "o")) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"mine.txt"});
  // A run's refusal still offers --resume, and leaves no lock either.
  r = run_gpumembench("--config " + kHole + " --device sim -q --output " + (dir / "o").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--resume"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "o" / ".gpumembench.lock"));
  fs::remove_all(dir);
}

// A text trace through a pipe (a FIFO, <(...)) is refused with the reason: a replay reads its
// trace more than once, and the second reading would find the pipe empty ("empty trace").
TEST(CliStrictness, ATextTraceThroughAPipeIsRefusedWithTheReason) {
  auto dir = temp_dir("trace_pipe");
  const std::string fifo = (dir / "t.csv").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string cmd = "cat " +
                          source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv") + " > " + fifo +
                          " & timeout 60 " + std::string(GMB_BINARY) + " replay --trace " + fifo +
                          " --allocator caching --device sim --capacity 8GiB --quiet 2>&1; st=$?; kill $! 2>/dev/null; exit $st";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = pclose(p);
  EXPECT_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 2) << out;
  EXPECT_NE(out.find(fifo + ": the trace is a pipe, and a replay reads its trace more than once"), std::string::npos)
      << out;
  fs::remove_all(dir);
}

// Thousands of distinct streams: the caching allocator refuses the case with a message (each
// stream's free-block index takes about 230 KiB) instead of growing by gigabytes.
// What a file that is not yet a trace says: an empty one lists the formats; an RMM header in
// other letters, or behind a byte order mark, is named as the near miss it is.
TEST(CliStrictness, NearMissesOfATraceFormatSayWhatTheyMiss) {
  auto dir = temp_dir("near_miss");
  const std::pair<std::string, std::string> cases[] = {
      {"", "empty.csv: empty trace: no header line (recognised: pytorch_snapshot"},
      {"thread,time,action,pointer,size,stream\n1,2,allocate,0x10,5,0x0\n",
       "empty.csv:1: unknown column 'thread' in the header (valid: action, id, bytes, stream); an RMM log's header is "
       "Thread,Time,Action,Pointer,Size,Stream, capitalised as RMM writes it"},
      {"\xef\xbb\xbfThread,Time,Action,Pointer,Size,Stream\n",
       "empty.csv: byte 0: not a trace in a recognised format: the content starts with a UTF-8 byte order mark (EF BB "
       "BF), which no trace format has; save the file without it (recognised: pytorch_snapshot"},
      {"action,id,bytes\ralloc,0,100\rfree,0,100\r",
       "empty.csv: byte 0: not a trace in a recognised format: its lines end in CR alone (classic Mac OS line "
       "endings), and a trace's lines end in LF or CRLF; convert them (e.g. tr '\\r' '\\n') (recognised: "},
  };
  for (const auto& [text, error] : cases) {
    SCOPED_TRACE(error);
    write_text(dir / "empty.csv", text);
    auto r = run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "empty.csv").string());
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(error), std::string::npos) << r.out;
  }
  fs::remove_all(dir);
}

// A memory limit is a fraction of the device: above the device's memory it is refused.
TEST(CliStrictness, AMemoryLimitAboveTheDeviceIsRefused) {
  auto dir = temp_dir("limit_above");
  write_text(dir / "t.csv", "action,id,bytes\nalloc,0,100\n");
  auto r = run_gpumembench("replay --device sim -q --allocator caching --capacity 1GiB --memory-limit 2GiB --trace " +
                           (dir / "t.csv").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--memory-limit: 2.00 GiB is more than the device's 1.00 GiB"), std::string::npos) << r.out;
  r = run_gpumembench("replay --device sim -q --allocator caching --capacity 1GiB --memory-limit 1GiB --trace " +
                      (dir / "t.csv").string());
  EXPECT_EQ(r.status, 0) << r.out;
  fs::remove_all(dir);
}

// A trace whose file name holds a terminal's escape: the name in the notes, the table's heading
// and the error messages has it escaped, never raw.
TEST(CliStrictness, ATraceFileNamesControlBytesAreEscaped) {
  auto dir = temp_dir("escaped_name");
  const fs::path good = dir / "ev\x1b[31mil.csv", bad = dir / ("b\x07" "d.csv");
  write_text(good, "action,id,bytes\nalloc,0,100\n");
  write_text(bad, "action,id,bytes\nalloc,0,x\n");
  auto r = run_gpumembench("replay --device sim --allocator caching --trace '" + good.string() + "'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("### trace[ev\\x1b[31mil.csv]"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  r = run_gpumembench("replay --device sim -q --allocator caching --trace '" + bad.string() + "'");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("b\\x07d.csv:2: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// A replay's file that is the trace it reads (by name or through a link), or two of its files
// that are one: exit 2 before anything runs, the trace untouched.
TEST(CliStrictness, AReplaysFilesMayNotBeItsTraceOrEachOther) {
  auto dir = temp_dir("same_file");
  const std::string trace_text = "action,id,bytes\nalloc,0,100\n";
  write_text(dir / "t.csv", trace_text);
  fs::create_symlink(dir / "t.csv", dir / "link.csv");
  const std::string replay = "replay --device sim -q --allocator caching --trace ";
  const std::pair<std::string, std::string> cases[] = {
      {(dir / "t.csv").string() + " --export-rmm-log " + (dir / "t.csv").string(),
       "--export-rmm-log " + (dir / "t.csv").string() + ": is the trace being replayed; write it elsewhere"},
      {(dir / "link.csv").string() + " --export-snapshot " + (dir / "t.csv").string(),
       "--export-snapshot " + (dir / "t.csv").string() + ": is the trace being replayed"},
      {(dir / "t.csv").string() + " --timeline " + (dir / "o.csv").string() + " --export-rmm-log " +
           (dir / "." / "o.csv").string(),
       "--timeline and --export-rmm-log name one file"},
  };
  for (const auto& [args, error] : cases) {
    SCOPED_TRACE(args);
    auto r = run_gpumembench(replay + args);
    EXPECT_EQ(r.status, 2) << r.out;
    EXPECT_NE(r.out.find(error), std::string::npos) << r.out;
    EXPECT_EQ(gmb::testing::read_text(dir / "t.csv"), trace_text);
    EXPECT_FALSE(fs::exists(dir / "o.csv"));
  }
  fs::remove_all(dir);
}

TEST(CliStrictness, ThousandsOfStreamsEndTheCachingCaseWithAMessage) {
  auto dir = temp_dir("many_streams");
  std::string csv = "action,id,bytes,stream\n";
  for (int i = 0; i < 2000; ++i) csv += "alloc," + std::to_string(i) + ",512," + std::to_string(i * 30) + "\n";
  for (int i = 0; i < 2000; ++i) csv += "free," + std::to_string(i) + ",," + std::to_string(i * 30) + "\n";
  write_text(dir / "t.csv", csv);
  auto r = run_gpumembench_bounded("replay --device sim -q --capacity 8GiB --trace " + (dir / "t.csv").string() +
                                   " --allocator caching");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("keeps free blocks of at most 1024 streams per pool"), std::string::npos) << r.out;
  r = run_gpumembench_bounded("replay --device sim -q --capacity 8GiB --trace " + (dir / "t.csv").string() +
                              " --allocator bfc");
  EXPECT_EQ(r.status, 0) << r.out;
  fs::remove_all(dir);
}

// One setting, one spelling: prefetch: yes is prefetch=true (one row label, found by
// --allocator), and written twice it is the same setting twice, an error; an empty alloc_conf is
// plain caching.
TEST(CliStrictness, BooleanSpellingsAndAnEmptyAllocConfAreOneSetting) {
  auto dir = temp_dir("spellings");
  const std::string hole = "workloads: [{hole_pattern: {sizes: [1MiB], free: [], probe: 1MiB}}]\n";
  write_text(dir / "a.yaml", "allocators: [{cuda_managed: {prefetch: yes}}]\n" + hole);
  auto r = run_gpumembench("--config " + (dir / "a.yaml").string() +
                           " --device sim -q --format csv --allocator 'cuda_managed[prefetch=true]' --output " +
                           (dir / "a").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(read_text(dir / "a" / "results.csv").find(",\"cuda_managed[prefetch=true]\","), std::string::npos);
  write_text(dir / "b.yaml", "allocators: [{cuda_managed: {prefetch: yes}}, {cuda_managed: {prefetch: 1}}]\n" + hole);
  r = run_gpumembench("--config " + (dir / "b.yaml").string() + " --device sim -q --output " + (dir / "b").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("'cuda_managed[prefetch=true]' already names allocators[0]"), std::string::npos) << r.out;
  write_text(dir / "c.yaml", "allocators: [caching, {caching: {alloc_conf: ''}}]\n" + hole);
  r = run_gpumembench("--config " + (dir / "c.yaml").string() + " --device sim -q --output " + (dir / "c").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("'caching' already names allocators[0]"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
