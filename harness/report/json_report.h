// results.json: every figure of every case, the contract that compare and scripts/plot.py read.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/run/results.h"

namespace gmb {

nlohmann::json to_json(const RunReport& report);

}  // namespace gmb
