// Config input without bounds: counts far past what a run can hold, huge or binary scalars
// echoed back, and files that never end (/dev/zero, a FIFO without a writer).
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace gmb::testing;

namespace {

gmb::testing::CommandResult run_config(const fs::path& config, const fs::path& out) {
  return run_gpumembench("--device sim --quiet --config " + config.string() + " --output " + out.string());
}

}  // namespace

TEST(ConfigBounds, CountsAreBoundedWithTheLimitInTheMessage) {
  auto dir = temp_dir("cfgbound");
  write_text(dir / "a.yaml", "allocators: [caching]\nworkloads:\n  - hole_pattern: {repeat: 1000000000000}\n");
  auto r = run_config(dir / "a.yaml", dir / "out");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("a.yaml:3:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1000000000000 is out of range (1 to 100000000)"), std::string::npos) << r.out;
  write_text(dir / "b.yaml",
             "allocators: [caching]\nworkloads:\n  - transformer: {layers: 1, hidden: 64, heads: 2, vocab: 64, "
             "seq_len: {dist: uniform, max: 100000000000000000}}\n");
  r = run_config(dir / "b.yaml", dir / "out");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("seq_len.max"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("100000000000000000 is out of range (1 to 16777216)"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}

// Found by the fuzz campaign of issue 13: a count option past 2^64 threw from std::stoull and
// ended the program; it is an option error (exit 2) naming the key and the valid range.
TEST(ConfigBounds, AllocatorCountOptionsPast64BitsAreErrors) {
  auto dir = temp_dir("cfgcount");
  write_text(dir / "a.yaml",
             "allocators:\n  - cuda_mempool: {trim_every_steps: 177777777777777777777777777777}\n"
             "workloads:\n  - hole_pattern: {}\n");
  auto r = run_config(dir / "a.yaml", dir / "out");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("trim_every_steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'177777777777777777777777777777' is not a non-negative integer below 2^64"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("up to 18446744073709551615"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}

TEST(ConfigBounds, ErrorsQuoteAShortEscapedExcerpt) {
  auto dir = temp_dir("cfgecho");
  write_text(dir / "a.yaml", "allocators: [caching]\nworkloads: [hole_pattern]\nrun: {on_oom: \"\\e[2J" +
                                 std::string(1 << 20, 'x') + "\"}\n");
  auto r = run_config(dir / "a.yaml", dir / "out");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("a.yaml:3:"), std::string::npos) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("\\x1b[2Jxxx"), std::string::npos) << r.out.substr(0, 400);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "no raw escape byte reaches the terminal";
  EXPECT_LT(r.out.size(), 1000u) << r.out.substr(0, 400);
  fs::remove_all(dir);
}

TEST(ConfigBounds, EndlessFilesAreErrorsNotHangs) {
  auto dir = temp_dir("cfgendless");
  auto r = run_gpumembench("--device sim --quiet --config /dev/zero --output " + (dir / "out").string());
  EXPECT_EQ(r.status, 2) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("/dev/zero: the config file: larger than 16 MiB"), std::string::npos) << r.out.substr(0, 400);
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  // Under timeout(1): before the fix the open blocked for ever, waiting for a writer.
  r = CommandResult{};
  const std::string cmd = "timeout 20 " + std::string(GMB_BINARY) + " --device sim --quiet --config " +
                          (dir / "fifo").string() + " --output " + (dir / "out").string() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("the config is empty"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}

TEST(ConfigBounds, AllocConfErrorsQuoteAShortEscapedExcerpt) {
  auto dir = temp_dir("cfgallocconf");
  const std::string big = "\\e[2J" + std::string(1 << 20, 'y');
  write_text(dir / "a.yaml", "allocators:\n  - caching: {alloc_conf: \"" + big + ":True\"}\nworkloads: [hole_pattern]\n");
  auto r = run_config(dir / "a.yaml", dir / "out");
  EXPECT_EQ(r.status, 2) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("a.yaml:2:"), std::string::npos) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("\\x1b[2Jyyy"), std::string::npos) << r.out.substr(0, 400);
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "no raw escape byte reaches the terminal";
  EXPECT_LT(r.out.size(), 1500u) << r.out.substr(0, 400);
  EXPECT_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}
