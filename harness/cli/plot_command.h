// `gpumembench plot RESULTS_DIR [--out DIR] [--formats png,pdf,svg]`: runs the plotting script
// installed with the binary (plot.py) under python3, with a clear message when python3 or
// matplotlib is missing. The interpreter: $GMB_PYTHON if set, else python3 on PATH.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace gmb {

// Returns the exit status: the script's (0 plots written, 2 bad input); 1 when python3,
// matplotlib or the script itself is missing (the message says which and how to install it).
int run_plot_command(const std::vector<std::string>& args, std::ostream& err);

}  // namespace gmb
