// Ops made ahead on the worker thread are the ops the workload makes inline, step for step,
// and a workload's error on the worker reaches the runner.
#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "harness/run/step_ops_ahead.h"
#include "workloads/transformer.h"

namespace gmb {
namespace {

TransformerParams dynamic_params() {
  TransformerParams p;
  p.layers = 2;
  p.steps = 40;
  p.seq_len.dist = SeqDist::Uniform;
  p.seq_len.min = 16;
  p.seq_len.max = 256;
  p.seq_len.seed = 5;
  return p;
}

TEST(StepOpsAhead, MakesTheSameOpsAsTheWorkloadInlineAndKeepsEachStepsComputeState) {
  auto inline_w = make_transformer(dynamic_params());
  auto ahead_w = make_transformer(dynamic_params());
  ASSERT_TRUE(ahead_w->makes_ops_ahead());
  ComputeContext ctx;  // sim: compute returns modeled seconds
  inline_w->prepare(ctx);
  ahead_w->prepare(ctx);
  StepOpsAhead maker(*ahead_w, 40);
  std::vector<Op> ops;
  for (std::uint64_t step = 0; step < 40; ++step) {
    ops.clear();
    StepInfo info;
    inline_w->step_ops(step, ops, info);
    const auto& made = maker.get(step);
    ASSERT_EQ(made.ops.size(), ops.size()) << "step " << step;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      ASSERT_EQ(made.ops[i].kind, ops[i].kind) << "step " << step << " op " << i;
      ASSERT_EQ(made.ops[i].id, ops[i].id) << "step " << step << " op " << i;
      ASSERT_EQ(made.ops[i].bytes, ops[i].bytes) << "step " << step << " op " << i;
    }
    EXPECT_EQ(made.info.padded_tokens, info.padded_tokens);
    // While the worker makes step + 1, this step's compute ops still see this step's shapes.
    ctx.step = step;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind != Op::Kind::Compute) continue;
      const ModeledKernel ahead = ahead_w->compute(made.ops[i], ctx), in_line = inline_w->compute(ops[i], ctx);
      ASSERT_DOUBLE_EQ(ahead.gpu_seconds, in_line.gpu_seconds) << "step " << step;
      ASSERT_DOUBLE_EQ(ahead.launch_seconds, in_line.launch_seconds) << "step " << step;
    }
  }
}

class FailsAtStep final : public Workload {
 public:
  std::string kind() const override { return "fails"; }
  std::string label() const override { return "fails"; }
  std::uint64_t num_steps() const override { return 10; }
  bool makes_ops_ahead() const override { return true; }
  void step_ops(std::uint64_t step, std::vector<Op>& out, StepInfo&) override {
    if (step == 3) throw std::runtime_error("no data for step 3");
    out.push_back({Op::Kind::Alloc, step + 1, 512, 0});
  }
};

TEST(StepOpsAhead, AWorkloadErrorOnTheWorkerReachesTheRunner) {
  FailsAtStep w;
  StepOpsAhead maker(w, 10);
  for (std::uint64_t step = 0; step < 3; ++step) EXPECT_EQ(maker.get(step).ops.at(0).id, step + 1);
  EXPECT_THROW(
      {
        try {
          maker.get(3);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "no data for step 3");
          throw;
        }
      },
      std::runtime_error);
}

// Where the threads running beside the run (a snapshot's self-check) take the spare cores, the
// ops are made on the runner's own thread: a worker would only take turns with them.
class RecordsItsThread final : public Workload {
 public:
  std::string kind() const override { return "threads"; }
  std::string label() const override { return "threads"; }
  std::uint64_t num_steps() const override { return 4; }
  bool makes_ops_ahead() const override { return true; }
  void step_ops(std::uint64_t step, std::vector<Op>& out, StepInfo&) override {
    threads.push_back(std::this_thread::get_id());
    out.push_back({Op::Kind::Alloc, step + 1, 512, 0});
  }
  std::vector<std::thread::id> threads;
};

TEST(StepOpsAhead, MakesTheOpsOnTheRunnersThreadWhereThreadsBesideTakeTheSpareCores) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: never a worker";
  RecordsItsThread beside, alone;
  {
    StepOpsAhead maker(beside, 4, nullptr, std::thread::hardware_concurrency());
    for (std::uint64_t step = 0; step < 4; ++step) EXPECT_EQ(maker.get(step).ops.at(0).id, step + 1);
  }
  {
    StepOpsAhead maker(alone, 4, nullptr, 0);
    for (std::uint64_t step = 0; step < 4; ++step) EXPECT_EQ(maker.get(step).ops.at(0).id, step + 1);
  }
  ASSERT_EQ(beside.threads.size(), 4u);
  for (const auto& id : beside.threads) EXPECT_EQ(id, std::this_thread::get_id());
  ASSERT_EQ(alone.threads.size(), 4u);
  for (const auto& id : alone.threads) EXPECT_NE(id, std::this_thread::get_id());
}

}  // namespace
}  // namespace gmb
