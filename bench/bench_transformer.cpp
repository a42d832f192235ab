// Host cost of the transformer workload's event generation and of the runner around it: the
// "harness overhead" that must stay under 1% of a step on the H200 (issue 5).
//
//   BM_TransformerStepOps/<layers>       step_ops() for the configs' model (h1024, b4, s1024)
//   BM_TransformerCaseOnSim/<allocator>/<oom details>
//                                        a whole run_case on sim (allocator 0: caching, 1:
//                                        cuda_mempool; oom details: the runner's per-event usage
//                                        record on or off); counters split the host time per step
//                                        into allocator calls, compute calls and the rest
//   BM_WorkloadNeed                      the workload's need (one pass over its events before the
//                                        timed runs, once per workload in a config run)
//   BM_DynamicSeqConfigOnSim             the whole of configs/dynamic_seq.yaml on sim
#include <benchmark/benchmark.h>

#include "harness/config/config.h"
#include "harness/run/runner.h"
#include "harness/run/workload_need.h"
#include "workloads/transformer.h"

namespace gmb {
namespace {

TransformerParams config_model(std::uint64_t layers, std::uint64_t steps) {
  TransformerParams p;
  p.style = Style::Korthikanti;
  p.layers = layers;
  p.hidden = 1024;
  p.heads = 16;
  p.vocab = 50257;
  p.batch = 4;
  p.steps = steps;
  p.seq_len.dist = SeqDist::Fixed;
  p.seq_len.value = 1024;
  return p;
}

void BM_TransformerStepOps(benchmark::State& state) {
  TransformerWorkload w(config_model(std::uint64_t(state.range(0)), 1u << 30));
  std::vector<Op> ops;
  std::uint64_t step = 1, n = 0;
  for (auto _ : state) {
    ops.clear();
    StepInfo info;
    w.step_ops(step++, ops, info);
    n += ops.size();
    benchmark::DoNotOptimize(ops.data());
  }
  state.counters["ops_per_step"] = double(n) / double(state.iterations());
  state.counters["ns_per_op"] =
      benchmark::Counter(double(n), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TransformerStepOps)->Arg(24)->Unit(benchmark::kMicrosecond);

void BM_TransformerCaseOnSim(benchmark::State& state) {
  const char* allocator = state.range(0) == 0 ? "caching" : "cuda_mempool";
  state.SetLabel(allocator);
  const std::uint64_t steps = 20;
  CaseSpec spec{allocator, {}, [&] { return make_transformer(config_model(24, steps)); }};
  DeviceSpec dev{DeviceChoice::Sim, 24 * GiB};
  RunSettings settings;
  settings.oom_block_map = state.range(1) != 0;
  double harness = 0, alloc = 0, compute = 0;
  for (auto _ : state) {
    CaseResult r = run_case(spec, dev, settings);
    harness += r.runs[0].harness_seconds;
    alloc += r.runs[0].alloc_seconds;
    compute += r.runs[0].compute_call_seconds;
  }
  const double per = 1e6 / double(state.iterations() * steps);
  state.counters["harness_us_per_step"] = harness * per;
  state.counters["alloc_us_per_step"] = alloc * per;
  state.counters["compute_call_us_per_step"] = compute * per;
}
BENCHMARK(BM_TransformerCaseOnSim)->Args({0, 1})->Args({0, 0})->Args({1, 1})->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_WorkloadNeed(benchmark::State& state) {
  const std::uint64_t steps = 20;
  std::uint64_t events = 0;
  for (auto _ : state) {
    auto w = make_transformer(config_model(24, steps));
    WorkloadNeed need = compute_workload_need(*w, 0);
    events += need.events;
    benchmark::DoNotOptimize(need.peak_requested_bytes);
  }
  // Time per step and per event (the workload made and walked: what a config run adds per workload).
  state.counters["per_step"] =
      benchmark::Counter(double(state.iterations() * steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["per_event"] =
      benchmark::Counter(double(events), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_WorkloadNeed)->Unit(benchmark::kMillisecond);

// configs/dynamic_seq.yaml on sim as `gpumembench --config configs/dynamic_seq.yaml --device sim`
// runs it (its 7 allocator settings x 300 steps, about 4.6 M events; the first case computes the
// workload's need from its own run, the others reuse it), without writing the reports. items/s
// = allocator events per second; /process_time: per CPU second of all threads.
void BM_DynamicSeqConfigOnSim(benchmark::State& state) {
  const Config config = load_config(std::string(GMB_SOURCE_DIR) + "/configs/dynamic_seq.yaml");
  DeviceSpec dev = config.device;
  dev.choice = DeviceChoice::Sim;
  std::uint64_t events = 0;
  for (auto _ : state) {
    const auto& w = config.workloads.at(0);
    std::shared_ptr<const WorkloadNeed> need;
    for (const auto& a : config.allocators) {
      CaseResult r = run_case(CaseSpec{a.name, a.options, w.make, need}, dev, config.run);
      events += r.runs.at(0).events;
      if (!need) need = r.need;
    }
  }
  state.SetItemsProcessed(std::int64_t(events));
}
BENCHMARK(BM_DynamicSeqConfigOnSim)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(BM_DynamicSeqConfigOnSim)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->Iterations(3);

}  // namespace
}  // namespace gmb
