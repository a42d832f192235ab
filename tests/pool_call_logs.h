// Shared by the tests that compare the simulated cudaMemPool with the H200 call by call: the
// H200's committed GMB_CUDA_CALL_LOG logs, and the sim's logs of the same run.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "test_helpers.h"
#include "workloads/byte_input.h"

namespace gmb::testing {

// A committed H200 call log (gzip), `rel` from the source tree, as text.
inline std::string h200_call_log(const std::string& rel) {
  const auto text = gmb::ByteInput::open(source_path(rel))->read_rest(1ull << 30, "the H200's call log");
  return std::string(text.data(), text.size());
}

// The call logs of `gpumembench --device sim --config configs/CONFIG.yaml --allocator cuda_mempool
// --steps STEPS` as text, one per simulated device in the order they were made (calls.csv.<pid>,
// then .<pid>.1, .2, ...), with 2.6 us of host time a pool call: what the log costs the H200's
// host, so that the sim's log and an H200 log of the same run compare call by call.
inline std::vector<std::string> sim_pool_call_logs(const std::string& config, int steps) {
  const auto dir = temp_dir("pool_call_logs");
  const auto r = run_gpumembench_with_prefix(
      "GMB_CUDA_CALL_LOG=" + (dir / "calls.csv").string() + " GMB_CUDA_POOL_CALL_DELAY_US=2.6 ",
      "--device sim -q --config " + source_path("configs/" + config + ".yaml") +
          " --allocator cuda_mempool --steps " + std::to_string(steps) + " --format json --output " +
          (dir / "out").string());
  EXPECT_EQ(r.status, 0) << r.out;
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("calls.csv.", 0) == 0) paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  std::vector<std::string> logs;
  for (const auto& p : paths) logs.push_back(read_text(p));
  std::filesystem::remove_all(dir);
  return logs;
}

}  // namespace gmb::testing
