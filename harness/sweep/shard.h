// A sweep split into N shards that run apart (Slurm array tasks, Slurm tasks of one step,
// Kubernetes indexed jobs, or by hand): shard I of N runs the cases whose plan index is I mod N,
// so every case runs in exactly one shard whatever the cases cost, and `gpumembench merge`
// joins the shards' case files into the tables of the whole sweep.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/sweep/case_plan.h"

namespace gmb {

struct Shard {
  std::size_t index = 0, count = 1;
  std::string source;  // "--shard", "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT", ...
  bool whole() const { return count <= 1; }
  std::string text() const;  // "1/3"
};

// A --shard value or an environment variable that is not a shard: the message names the flag or
// variable and the value (exit 2).
struct ShardError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "I/N" with 0 <= I < N (N at most kMaxShards).
Shard parse_shard(const std::string& text);
constexpr std::size_t kMaxShards = 1000000;

// The variable Kubernetes users set to the Job's `completions` beside JOB_COMPLETION_INDEX (an
// indexed Job does not export its count).
inline constexpr const char* kShardCountVariable = "GPUMEMBENCH_SHARD_COUNT";

// The shard from the engine that launched the process, in this order: SLURM_ARRAY_TASK_ID with
// SLURM_ARRAY_TASK_COUNT (the index counted from SLURM_ARRAY_TASK_MIN, in steps of
// SLURM_ARRAY_TASK_STEP), SLURM_PROCID with SLURM_NTASKS, JOB_COMPLETION_INDEX with
// GPUMEMBENCH_SHARD_COUNT. nullopt: none is set. getenv: the environment (a test passes its own).
using EnvLookup = std::function<const char*(const char*)>;
std::optional<Shard> shard_from_environment(const EnvLookup& getenv);

// The cases of the plan that this shard runs (their plan indexes kept).
std::vector<PlannedCase> cases_of_shard(const std::vector<PlannedCase>& plan, const Shard& shard);

}  // namespace gmb
