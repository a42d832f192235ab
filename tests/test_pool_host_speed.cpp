// A cudaMemPool's layout depends on which frees the GPU has reached, so at a tight cap its OOMs
// depend on how fast the host is: on the H200, 5-10 us more host time per pool call
// (GMB_CUDA_POOL_CALL_DELAY_US) turns configs/fixed_seq_eager.yaml's run to the end into a
// fragmentation OOM at step 13-15 (results/h200/probe/pool/delay/). The sim models the same
// mechanism (the recent-free tier, the launch rounds) and honours the same variable.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_helpers.h"

using namespace gmb::testing;
using nlohmann::json;

namespace {

json untrimmed_pool_case(const std::string& prefix, const std::string& name) {
  auto dir = temp_dir(name);
  auto r = run_gpumembench_with_prefix(prefix, "--device sim -q --config " + source_path("configs/fixed_seq_eager.yaml") +
                                                   " --allocator cuda_mempool --steps 60 --format json --output " +
                                                   (dir / "out").string());
  EXPECT_EQ(r.status, 0) << r.out;
  json j = json::parse(read_text(dir / "out" / "results.json"));
  for (const json& c : j["cases"])
    if (c["allocator_label"] == "cuda_mempool") return c;
  ADD_FAILURE() << "no cuda_mempool case";
  return {};
}

}  // namespace

TEST(PoolHostSpeed, ASlowerHostTurnsFixedSeqEagersRunIntoAFragmentationOomOnSimAsOnTheH200) {
  const json fast = untrimmed_pool_case("", "pool_fast");
  EXPECT_TRUE(fast["oom"].is_null()) << fast["oom"].dump();
  EXPECT_EQ(fast["steps_completed"], 60);
  const json slow = untrimmed_pool_case("GMB_CUDA_POOL_CALL_DELAY_US=10 ", "pool_slow");
  ASSERT_FALSE(slow["oom"].is_null());
  EXPECT_EQ(slow["oom"]["kind"], "fragmentation");
  EXPECT_EQ(slow["oom"]["step"], 39);  // the H200: step 13 at 10 us, 15 at 5 us
}
