// A sweep whose cases run in worker processes, each case in a process of its own (a crash, a
// sticky CUDA error or an exhausted host ends that case alone): slots on the CPU (--jobs N on
// sim) or one per GPU, pinned by CUDA_VISIBLE_DEVICES (--gpus), cases from one queue in plan
// order. Each worker writes its case's file (sweep.h: run_planned_case); a worker that ends
// without one leaves a failed case in its place, with the reason. The tables are made from the
// case files, in plan order, as a run of one process makes them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/config/config.h"
#include "harness/sweep/sweep.h"
#include "harness/sweep/worker_pool.h"

namespace gmb {

struct WorkerSetup {
  std::vector<WorkerSlot> slots;
  // The worker's command line but the case: the case's id is added as `--worker-case ID`.
  std::vector<std::string> argv;
};

struct WorkerObserver {
  std::function<void(std::size_t index, const std::string& slot)> start_case;
  std::function<void(std::size_t index, std::uint64_t repeat, std::uint64_t step, std::uint64_t steps)> step;
  std::function<void(std::size_t index)> end_case;
};

// A worker's line for one step of its case ("step R S N"), and its reading (false: not one).
std::string worker_step_line(std::uint64_t repeat, std::uint64_t step, std::uint64_t steps);
bool parse_worker_step_line(const std::string& line, std::uint64_t& repeat, std::uint64_t& step, std::uint64_t& steps);

// As run_sweep, the cases run by workers. The report's device is the one the workers describe in
// their case files (this process touches no GPU), header.device where no case file says.
SweepResult run_sweep_in_workers(const Config& config, const std::vector<PlannedCase>& plan, RunReport header,
                                 const CaseFiles& files, bool resume, const WorkerSetup& workers,
                                 const WorkerObserver& observer);

}  // namespace gmb
