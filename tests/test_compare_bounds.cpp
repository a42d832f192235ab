// compare inputs that never end: /dev/zero and a FIFO without a writer are errors, not hangs.
#include <sys/stat.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace gmb::testing;

namespace {

// Under timeout(1): before the fix both read (or waited) for ever.
CommandResult run_with_timeout(const std::string& args) {
  CommandResult r;
  const std::string cmd = "timeout 60 " + std::string(GMB_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace

TEST(CompareBounds, EndlessInputsAreErrorsNotHangs) {
  auto dir = temp_dir("cmpbound");
  auto r = run_with_timeout("compare /dev/zero /dev/zero");
  EXPECT_EQ(r.status, 2) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("/dev/zero: larger than 1024 MiB"), std::string::npos) << r.out.substr(0, 400);
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  r = run_with_timeout("compare " + (dir / "fifo").string() + " " + (dir / "fifo").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("fifo: not JSON"), std::string::npos) << r.out;
  fs::remove_all(dir);
}
