// Reports of a run: the terminal/Markdown table, CSV, LaTeX and results.json.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/results.h"

namespace gmb {

nlohmann::json to_json(const RunReport& report);
std::string markdown_table(const RunReport& report);
std::string csv_table(const RunReport& report);
std::string latex_table(const RunReport& report);

// Writes results.{json,csv,md,tex} for the chosen formats plus timelines/ and OOM block maps
// into dir. Files are written to a temporary name and renamed, so none is left half-written.
void write_reports(const RunReport& report, const std::string& dir, const std::vector<std::string>& formats);

// The current UTC time in strftime's format (for output folder names and report headers).
std::string utc_now(const char* format);

// Writes text to path through a temporary file and a rename.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace gmb
