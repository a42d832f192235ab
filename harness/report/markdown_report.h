// results.md, also printed on the terminal: the tables a person reads.
#pragma once

#include <string>

#include "harness/run/results.h"

namespace gmb {

std::string markdown_table(const RunReport& report);

}  // namespace gmb
