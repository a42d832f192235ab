// The cases of a config, run one after another into an output folder: each case's result is
// written to DIR/cases/<id>.json as soon as it ends (case_file.h), a resumed run takes the
// cases whose files are there instead of running them, and a stop request (stop_request.h)
// ends the sweep between two cases.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/config/config.h"
#include "harness/run/results.h"
#include "harness/sweep/case_plan.h"

namespace gmb {

struct SweepObserver {
  std::function<void(std::size_t index, const std::string& label)> start_case;
  ProgressFn step;
  std::function<void()> end_case;
};

struct SweepResult {
  RunReport report;             // every case when !stopped; the cases done so far otherwise
  std::size_t reused = 0;       // cases read from the folder of an earlier run
  std::size_t ran = 0;          // cases run now
  bool stopped = false;         // a stop request came before every case was done
  std::vector<std::string> notes;  // for the user: case files not read back, files of other cases
};

// header: the report without its cases (tool version, config, device, ...). device: the run's
// device spec (the capacity of each case comes from the plan). resume: read the case files
// already in dir/cases. Throws for a case file that cannot be written (the message names it).
SweepResult run_sweep(const Config& config, const DeviceSpec& device, const std::vector<PlannedCase>& plan,
                      RunReport header, const std::string& dir, bool resume, const SweepObserver& observer);

}  // namespace gmb
