// A run's flags, and the config with them applied, its device resolved and its cases planned:
// what a run, `gpumembench plan`, `gpumembench merge --config` and a sweep's worker share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/cli/usage_error.h"
#include "harness/config/config.h"
#include "harness/sweep/case_plan.h"

namespace gmb {

struct RunArgs {
  std::string config, device, capacity, output, resume, format, baseline;
  bool overwrite = false, quiet = false;
  std::uint64_t steps = 0;
  std::vector<std::string> allocators;
  std::string shard;                 // --shard I/N ("" the environment's, or the whole sweep)
  std::uint64_t jobs = 0;            // --jobs N: worker processes on sim (0: none)
  std::string gpus;                  // --gpus all|0,1,...: one worker per GPU ("" none)
  bool in_process = false;           // --in-process: GPU cases in this process, not one process each
  std::string worker_case;           // internal: run this case id alone (a worker of a sweep)
  std::string worker_command;        // internal: the sweep's command line, for the case file
  std::string metrics;               // --metrics: families the tables show (comma-separated), "" the config's
};

struct PlannedRun {
  Config config;
  DeviceSpec spec;
  std::vector<Bytes> capacity_sweep;  // the configured capacities when they are a sweep
  std::vector<PlannedCase> cases;
};

PlannedRun plan_run(const RunArgs& a, bool quiet);

DeviceChoice parse_device_choice(const std::string& s);
std::vector<std::string> parse_formats(const std::string& text);
Bytes parse_capacity(const std::string& text);
// Resolves the device choice and says so in one line when falling back to sim.
DeviceSpec choose_device(DeviceSpec spec, bool quiet);

}  // namespace gmb
