// The `frontier` subcommand: its flags and how it runs (the search itself: harness/frontier/).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace gmb {

struct FrontierCliArgs {
  std::string config, param, lo, hi, resolution, device, capacity, output;
  std::uint64_t steps = 0;              // --steps: as for a run (0: the workloads' own)
  std::vector<std::string> allocators;  // --allocator: as for a run (empty: all)
  bool quiet = false;
  bool overwrite = false;  // --overwrite: replace the frontier files in an existing --output
};

CLI::App* add_frontier_command(CLI::App& app, FrontierCliArgs& args);
// Exit status: 0, 2 for bad usage (ConfigError is left to the caller), 1 when a search failed.
int run_frontier_command(const FrontierCliArgs& args, const std::string& command_line);

}  // namespace gmb
