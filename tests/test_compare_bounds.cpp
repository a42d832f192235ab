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

TEST(CompareBounds, EndlessInputsAreErrorsNotHangs) {
  auto dir = temp_dir("cmpbound");
  auto r = run_gpumembench_bounded("compare /dev/zero /dev/zero");
  EXPECT_EQ(r.status, 2) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("/dev/zero: larger than 1024 MiB"), std::string::npos) << r.out.substr(0, 400);
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  r = run_gpumembench_bounded("compare " + (dir / "fifo").string() + " " + (dir / "fifo").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("fifo: not JSON"), std::string::npos) << r.out;
  fs::remove_all(dir);
}
