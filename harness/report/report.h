// Writing a run's reports: one file per chosen format (each format has its own reporter:
// json_report.h, csv_report.h, markdown_report.h, latex_report.h) plus the per-case timelines
// (timeline_report.h) and the OOM block maps (oom_block_map.h).
#pragma once

#include <string>
#include <vector>

#include "harness/io/atomic_write.h"  // write_file_atomically
#include "harness/run/results.h"

namespace gmb {

// Writes results.{json,csv,md,tex} for the chosen formats plus timelines/ and OOM block maps
// into dir. Files are written to a temporary name and renamed, so none is left half-written.
void write_reports(const RunReport& report, const std::string& dir, const std::vector<std::string>& formats);

// The current UTC time in strftime's format (for output folder names and report headers).
std::string utc_now(const char* format);

}  // namespace gmb
