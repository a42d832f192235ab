// Config input that YAML accepts but a person did not mean: a key given twice in any map.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_helpers.h"

namespace fs = std::filesystem;
using namespace gmb::testing;

namespace {

void expect_config_error(const std::string& yaml, const std::vector<std::string>& needles) {
  auto dir = temp_dir("cfgin");
  write_text(dir / "bad.yaml", yaml);
  auto out = dir / "out";
  auto r = run_gpumembench("--device sim --quiet --config " + (dir / "bad.yaml").string() + " --output " + out.string());
  EXPECT_EQ(r.status, 2) << r.out;
  for (const auto& n : needles) EXPECT_NE(r.out.find(n), std::string::npos) << "missing '" << n << "' in:\n" << r.out;
  EXPECT_FALSE(fs::exists(out)) << "a bad config must not write anything";
  fs::remove_all(dir);
}

}  // namespace

TEST(ConfigInput, DuplicateKeysAreErrorsNamingBothLines) {
  // Two allocators lists at the top level.
  expect_config_error("allocators: [cuda_malloc]\nworkloads: [hole_pattern]\nallocators: [caching]\n",
                      {"bad.yaml:3:1:", "'allocators' is given twice", "line 1 and line 3"});
  // A key twice in a workload map.
  expect_config_error(
      "allocators: [caching]\nworkloads:\n  - hole_pattern:\n      repeat: 1\n      sizes: [1MiB]\n"
      "      repeat: 3\n",
      {"bad.yaml:6:7:", "workloads[0].hole_pattern.repeat", "line 4 and line 6"});
  // In allocator options (a flow map).
  expect_config_error("allocators:\n  - caching: {alloc_conf: \"expandable_segments:True\",\n"
                      "      alloc_conf: \"\"}\nworkloads: [hole_pattern]\n",
                      {"bad.yaml:3:7:", "allocators[0].caching.alloc_conf", "line 2 and line 3"});
  // In run:, and in a map inside a list inside a map.
  expect_config_error("allocators: [caching]\nworkloads: [hole_pattern]\nrun: {repeat: 1, repeat: 2}\n",
                      {"bad.yaml:3:", "run.repeat", "line 3 and line 3"});
}
