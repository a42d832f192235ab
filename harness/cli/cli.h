#pragma once

namespace gmb {
// The gpumembench command line. Returns the exit status: 0 every case ran, 2 bad usage or
// config, 1 internal error.
int run_cli(int argc, char** argv);
}  // namespace gmb
