// One case's result as a file of its own, DIR/cases/<case id>.json, written the moment the case
// ends: a run that is stopped (Ctrl-C, SIGTERM, a crash, a lost node) keeps every case it
// finished, `--resume DIR` skips them, and the tables are made from these files. The file holds
// the whole CaseResult (every figure the tables, results.json, oom/ and timelines/ are made
// from, doubles to the last bit), the case's spec and id (case_plan.h) and the run it belonged to.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/run/results.h"

namespace gmb {

// The version of the file's layout; a file of another version is not read back (the case runs again).
constexpr int kCaseFileFormat = 1;

// What a case file says besides the result: which case it is and where it ran.
struct CaseFileHeader {
  std::string id;         // case_plan.h: a hash of `spec`
  nlohmann::json spec;    // the case's full spec
  std::string tool_version;
  std::string config_name, config_path, command_line;
  std::string started_at, finished_at;  // ISO 8601 UTC
  DeviceInfo device;
  // Where the case stands in its run, and how the run writes its tables: a merge of case files
  // from several folders (shards, nodes) orders and writes them as the run would.
  std::size_t plan_index = 0, plan_cases = 0;
  std::string baseline;
  std::vector<std::string> formats;
  std::vector<std::string> metrics;  // the fragmentation-metric families the tables show ([] the default)
};

struct CaseFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

nlohmann::json case_result_json(const CaseResult& c);
CaseResult case_result_from_json(const nlohmann::json& j);  // throws CaseFileError
nlohmann::json device_info_json(const DeviceInfo& d);
nlohmann::json case_gpu_json(const CaseGpu& g);
DeviceInfo device_info_from_json(const nlohmann::json& j);

nlohmann::json case_file_json(const CaseFileHeader& header, const CaseResult& result);
// The case file's text: case_file_json(header, result).dump(), with the usage window up to an
// OOM (up to 131,072 rows of four numbers) written directly rather than as a json value per row.
std::string case_file_text(const CaseFileHeader& header, const CaseResult& result);

struct LoadedCase {
  CaseFileHeader header;
  CaseResult result;
};
// Reads DIR/cases/<id>.json back. Throws CaseFileError naming the file for one that is not a
// case file of this layout (another version, damaged by hand).
LoadedCase read_case_file(const std::string& path);

// "cases/<id>.json" under dir.
std::string case_file_path(const std::string& dir, const std::string& id);

}  // namespace gmb
