// `gpumembench reduce` on configs/dynamic_seq.yaml's fragmentation OOM (default caching at 24 GiB,
// step 223, event 490,784), with expandable_segments:True as the contrast: one whole reduction per
// iteration, as the CLI makes it (the workload's events in memory, a fresh simulated device and
// allocator per replay).
//
//   BM_ReduceDynamicSeqOom  counters: events/s replayed, replays, events before and after
#include <benchmark/benchmark.h>

#include "common/units.h"
#include "harness/config/config.h"
#include "harness/reduce/reduce.h"

namespace gmb {
namespace {

const std::vector<Op>& dynamic_seq_ops() {
  static const std::vector<Op> ops = [] {
    Config config = load_config(std::string(GMB_SOURCE_DIR) + "/configs/dynamic_seq.yaml");
    auto workload = config.workloads.at(0).make();
    std::vector<Op> out, step;
    for (std::uint64_t s = 0; s < 224; ++s) {  // the OOM is in step 223
      step.clear();
      StepInfo info;
      whole_step_ops(*workload, s, step, info);
      for (const Op& op : step)
        if (op.kind != Op::Kind::Compute) out.push_back(op);
    }
    return out;
  }();
  return ops;
}

void BM_ReduceDynamicSeqOom(benchmark::State& state) {
  const std::vector<Op>& ops = dynamic_seq_ops();
  ReduceSettings s;
  s.target = {"caching", {}, 24 * GiB};
  s.contrast = AllocatorOptions{{"alloc_conf", "expandable_segments:True"}};
  s.max_seconds = 0;
  ReduceResult r;
  for (auto _ : state) r = reduce_oom(ops, s);
  state.counters["events_replayed_per_s"] =
      benchmark::Counter(double(r.events_replayed) * double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["replays"] = double(r.replays);
  state.counters["events_before"] = double(r.oom_event + 1);
  state.counters["events_after"] = double(r.ops.size());
}
BENCHMARK(BM_ReduceDynamicSeqOom)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace gmb
