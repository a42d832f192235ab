// Case files from several folders (the shards of a sweep, runs on other nodes, an interrupted run
// and its rerun) joined into one run's report, as a run of the whole sweep would make it: the
// cases in plan order, the header from the case files. Nothing is joined that should not be: a
// file whose id is not the hash of its spec, two files of one sim case whose figures differ (a
// GPU case's may: the driver decides part of them; the difference is reported), and (unless
// allowed) cases of different tool versions or devices.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/run/results.h"
#include "harness/sweep/case_plan.h"

namespace gmb {

// Bad input: the message names the folder or file(s) (exit 2).
struct MergeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct MergedCase {
  std::string id, path;  // the file kept
  std::string text;      // its content, copied into the merged folder's cases/
};

struct MergeResult {
  RunReport report;                   // command_line and started_at left to the caller
  std::vector<MergedCase> files;      // in the order of report.cases
  std::vector<std::string> formats;   // as the runs wrote their tables ("" none said)
  std::vector<std::string> missing;   // cases of the plan without a file (labels, or "case 3 of 12 of NAME")
  std::vector<std::string> notes;     // duplicates that agreed, files left out, mixed versions allowed
};

// dirs: run folders (each with a cases/ folder). plan: the config's cases (--config), or null:
// every case file, ordered by config and plan index. allow_mixed: join cases of different tool
// versions or devices (the first one's device heads the tables).
MergeResult merge_case_folders(const std::vector<std::string>& dirs, const std::vector<PlannedCase>* plan,
                               bool allow_mixed);

// A case's figures without what the host clock or the GPU it ran on decide (timings, the GPU's
// identity, the capacity measured after the ballast, the OOM message's text): two runs of one
// case agree on these.
nlohmann::json comparable_figures(const CaseResult& c);

}  // namespace gmb
