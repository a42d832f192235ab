// The cases of a config, run one after another into an output folder: each case's result is
// written to DIR/cases/<id>.json as soon as it ends (case_file.h), a resumed run takes the
// cases whose files are there instead of running them, and a stop request (stop_request.h)
// ends the sweep between two cases. A case run by a worker process (worker_pool.h) goes through
// run_planned_case too, so its file is the same as in a run of one process.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/config/config.h"
#include "harness/run/case_file.h"
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

// Where a run's case files go and what each says besides its result.
struct CaseFiles {
  std::string dir;                   // the output folder (files in dir/cases)
  std::size_t plan_cases = 0;        // the cases of the whole sweep (all shards)
  std::vector<std::string> formats;  // the tables the run writes
};

// header: the report without its cases (tool version, config, device, ...). device: the run's
// device spec (the capacity of each case comes from the plan). resume: read the case files
// already in dir/cases. Throws for a case file that cannot be written (the message names it).
SweepResult run_sweep(const Config& config, const DeviceSpec& device, const std::vector<PlannedCase>& plan,
                      RunReport header, const CaseFiles& files, bool resume, const SweepObserver& observer);

// One case of the plan run and written to its file. need: the workload's need when known.
CaseResult run_planned_case(const Config& config, const DeviceSpec& device, const PlannedCase& c,
                            const RunReport& header, const CaseFiles& files, const SweepObserver& observer,
                            std::shared_ptr<const WorkloadNeed> need = nullptr);

// A case that could not run at all (its worker process died): its labels and the error, written
// to its file as a case that failed (--resume runs it again).
CaseResult write_failed_case(const Config& config, const PlannedCase& c, const RunReport& header,
                             const CaseFiles& files, const std::string& error);

// The case file at path when it is this case's, finished without an error (what --resume keeps);
// nullopt otherwise, with a note saying why when there was a file.
std::optional<CaseResult> finished_case(const std::string& path, const PlannedCase& c, std::vector<std::string>& notes);

// The note about files in dir/cases that no case of the plan owns ("" none).
std::string other_case_files_note(const std::string& dir, const std::vector<PlannedCase>& plan);

}  // namespace gmb
