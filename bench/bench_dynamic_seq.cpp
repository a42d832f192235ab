// One case of configs/dynamic_seq.yaml on sim at a time (issue 11: the synthetic workloads share
// the replay pipeline): where a config run's time goes, allocator setting by allocator setting.
//
//   BM_DynamicSeqCaseOnSim/<i>   run_case of the config's i-th allocator setting (0 cuda_malloc,
//                                1 cuda_managed[prefetch], 2 cuda_mempool, 3 cuda_mempool[trim
//                                100], 4 caching, 5 caching[expandable], 6 caching[max_split
//                                128]) over its 300 steps, with the workload's need given (as
//                                every case after a sweep's first has it), without the reports.
//                                items/s: allocator events per second; /process_time: per CPU
//                                second of both threads (the runner's and the step maker's).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "harness/config/config.h"
#include "harness/run/runner.h"
#include "harness/run/workload_need.h"

namespace gmb {
namespace {

void BM_DynamicSeqCaseOnSim(benchmark::State& state) {
  static const Config config = load_config(std::string(GMB_SOURCE_DIR) + "/configs/dynamic_seq.yaml");
  static const std::shared_ptr<const WorkloadNeed> need = [] {
    auto w = config.workloads.at(0).make();
    return std::make_shared<const WorkloadNeed>(compute_workload_need(*w, config.run.max_steps));
  }();
  const auto& a = config.allocators.at(std::size_t(state.range(0)));
  DeviceSpec dev = config.device;
  dev.choice = DeviceChoice::Sim;
  std::uint64_t events = 0;
  for (auto _ : state) {
    CaseResult r = run_case(CaseSpec{a.name, a.options, config.workloads.at(0).make, need}, dev, config.run);
    events += r.runs.at(0).events;
    state.SetLabel(r.allocator_label);
  }
  state.SetItemsProcessed(std::int64_t(events));
}
BENCHMARK(BM_DynamicSeqCaseOnSim)->DenseRange(0, 6)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->Iterations(3);

}  // namespace
}  // namespace gmb
