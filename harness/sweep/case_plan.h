// A config expanded into its cases, in the order the tables list them (capacity, then workload,
// then allocator), each with a stable id: a hash of everything that decides its result (the
// allocator and its options, the workload's parameters and the content of the files it reads,
// the device kind and capacity, the run settings) and the tool version. The same config and
// flags give the same ids on any machine, so a case file named by its id (case_file.h) is found
// again by `--resume` and by a merge of runs; anything that changes the result changes the id.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/config/config.h"

namespace gmb {

struct PlannedCase {
  std::size_t index = 0;  // position in the tables
  std::size_t workload_index = 0, allocator_index = 0;
  Bytes capacity_bytes = 0;  // asked for (0: the device's own)
  std::string at;            // " @ 8.00 GiB" in a capacity sweep, else ""
  std::string label;         // "<allocator label> x <workload kind><at>"
  nlohmann::json spec;
  std::string id;
};

struct CasePlanError : std::runtime_error {
  using std::runtime_error::runtime_error;  // an input file that cannot be read: names it
};

// device: sim or cuda (resolved); capacities: one set of cases each; sweep: label the cases with
// their capacity. config.run carries --steps.
std::vector<PlannedCase> plan_cases(const Config& config, DeviceChoice device, const std::vector<Bytes>& capacities,
                                    bool sweep);

// The first 16 hex digits of the SHA-256 of the spec's compact JSON (keys sorted).
std::string case_id(const nlohmann::json& spec);

// SHA-256 of a file's content, in hex; CasePlanError naming the file when it cannot be read.
std::string file_sha256(const std::string& path);

// One line of `gpumembench plan`: {"index", "id", "label", "spec"}.
nlohmann::json plan_json(const PlannedCase& c);

}  // namespace gmb
