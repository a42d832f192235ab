// Trace and histogram inputs that never end or never break a line: /dev/zero, /dev/urandom, a
// FIFO nobody writes to, a line of megabytes. Each is a clear error naming the file, at once.
#include <sys/stat.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "test_helpers.h"
#include "workloads/seq_len.h"
#include "workloads/trace.h"

namespace fs = std::filesystem;
using namespace gmb::testing;

namespace {

std::string trace_error(const std::string& path) {
  try {
    auto source = gmb::open_trace(path);
    std::vector<gmb::Op> ops;
    while (source->read(ops, 65536)) ops.clear();
  } catch (const gmb::TraceError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(InputBounds, LongLineInANativeCsvTraceIsAnErrorAtItsLine) {
  auto dir = temp_dir("longline");
  // A header, one good row, then a 4 MiB field with no line end.
  write_text(dir / "t.csv", "action,id,bytes\nalloc,0,4096\nalloc,1," + std::string(4 << 20, '7'));
  const std::string e = trace_error((dir / "t.csv").string());
  EXPECT_NE(e.find("t.csv: byte 29: line 3 is longer than 1 MiB"), std::string::npos) << e.substr(0, 300);
  EXPECT_LT(e.size(), 300u) << "the line is not echoed";
  fs::remove_all(dir);
}

TEST(InputBounds, LongLineInAnRmmLogIsAnError) {
  auto dir = temp_dir("longrmm");
  write_text(dir / "r.csv", "Thread,Time,Action,Pointer,Size,Stream\n" + std::string(3 << 20, 'x') + "\n");
  const std::string e = trace_error((dir / "r.csv").string());
  EXPECT_NE(e.find("line 2 is longer than 1 MiB"), std::string::npos) << e.substr(0, 300);
  fs::remove_all(dir);
}

TEST(InputBounds, EndlessTracesAreErrorsNotHangs) {
  auto dir = temp_dir("endless");
  // /dev/zero: NUL bytes, no line end: binary content, found in the first 64 KiB.
  auto r = run_gpumembench_bounded("replay --trace /dev/zero --allocator caching --device sim --quiet");
  EXPECT_EQ(r.status, 2) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("/dev/zero: byte 0: not a trace in a recognised format"), std::string::npos)
      << r.out.substr(0, 400);
  // /dev/urandom: whatever its first bytes look like (text, gzip, a pickle), an error at once.
  for (int i = 0; i < 20; ++i) {
    r = run_gpumembench_bounded("replay --trace /dev/urandom --allocator caching --device sim --quiet");
    EXPECT_EQ(r.status, 2) << r.out.substr(0, 400);
    EXPECT_NE(r.out.find("/dev/urandom"), std::string::npos) << r.out.substr(0, 400);
    EXPECT_LT(r.out.size(), 2000u);
  }
  // A FIFO is refused (a replay reads its trace more than once), written to or not.
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  r = run_gpumembench_bounded("replay --trace " + (dir / "fifo").string() + " --allocator caching --device sim --quiet");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("fifo"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(InputBounds, SnapshotFromAPipeIsRefusedNotReadWithoutEnd) {
  // A pickle's first byte (PROTO) from a FIFO whose writer never stops: refused before it is read.
  auto dir = temp_dir("pickpipe");
  const std::string fifo = (dir / "snap.pickle").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  CommandResult r;
  // fd 3 holds the FIFO open (read-write) so that the reader meets a writer whatever the order.
  const std::string cmd = "exec 3<>" + fifo + "; (printf '\\200\\004'; exec cat /dev/zero) > " + fifo + " & timeout 60 " +
                          std::string(GMB_BINARY) + " replay --trace " + fifo +
                          " --allocator caching --device sim --quiet 2>&1; st=$?; kill $! 2>/dev/null; exit $st";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  EXPECT_EQ(r.status, 2) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("the trace is a pipe, and a replay reads its trace more than once: give it as a regular file"),
            std::string::npos)
      << r.out.substr(0, 400);
  fs::remove_all(dir);
}

TEST(InputBounds, HistogramFileIsBounded) {
  auto dir = temp_dir("histbound");
  auto expect_error = [](const std::string& path, const std::string& what) {
    try {
      gmb::read_histogram(path);
      ADD_FAILURE() << path << ": no error";
    } catch (const gmb::SeqLenError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_LT(std::string(e.what()).size(), 400u);
    }
  };
  expect_error("/dev/zero", "/dev/zero: byte 0: line 1 is longer than 1 MiB");
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  expect_error((dir / "fifo").string(), "no bin with a positive weight");
  // 17 MiB of good lines: over the 16 MiB bound.
  {
    std::string text = "length,weight\n";
    while (text.size() < (17u << 20)) text += "1024,1\n";
    write_text(dir / "big.csv", text);
  }
  expect_error((dir / "big.csv").string(), "the histogram file is larger than 16 MiB");
  // A bad field is quoted short and escaped.
  write_text(dir / "bad.csv", "128,1\n\x1b[2J" + std::string(5000, 'z') + ",1\n");
  expect_error((dir / "bad.csv").string(), "bad.csv:2: length '\\x1b[2Jzzz");
  fs::remove_all(dir);
}
