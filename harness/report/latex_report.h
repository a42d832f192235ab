// results.tex: a booktabs table ready to \input in a paper.
#pragma once

#include <string>

#include "harness/run/results.h"

namespace gmb {

std::string latex_table(const RunReport& report);

}  // namespace gmb
