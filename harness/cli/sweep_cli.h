// The run command's sweep flags (sweep_cli.cpp): which shard of the sweep this process runs
// (--shard, or the launcher's environment), the worker processes of --jobs and --gpus, and the
// worker's side (the internal --worker-case: one case into the sweep's folder).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/cli/run_plan.h"
#include "harness/sweep/parallel_sweep.h"
#include "harness/sweep/shard.h"

namespace gmb {

// --shard, else the environment's shard (shard.h), else the whole sweep; says which on stderr
// unless quiet. UsageError for a bad value (the flag or variable named).
Shard resolve_shard(const std::string& flag, bool quiet);

// The workers of --jobs N (sim) or --gpus all|0,1,... (cuda); nullopt when neither is given.
// UsageError for a value that cannot be (no such GPU, --gpus on sim, --jobs on cuda).
std::optional<WorkerSetup> worker_setup(const RunArgs& a, const PlannedRun& p, const std::string& baseline,
                                        const std::vector<std::string>& formats, const std::string& out_dir,
                                        const std::string& command_line);

// A worker: the case a.worker_case of the plan, run and written into a.output/cases; its steps
// as lines on stdout (parallel_sweep.h). Exit 0 once the case file is written (the case's own
// error, if any, is in it).
int run_worker_case(const RunArgs& a);

}  // namespace gmb
