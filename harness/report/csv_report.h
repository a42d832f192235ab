// results.csv: one row per case with raw figures, for scripts and spreadsheets.
#pragma once

#include <string>

#include "harness/run/results.h"

namespace gmb {

std::string csv_table(const RunReport& report);

}  // namespace gmb
