// The `reduce` subcommand (reduce_cli.cpp): flags, input (a trace, or a config's workload), the
// reduction with progress on a terminal, the checks through the runner, the output folder.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace gmb {

struct ReduceCliArgs {
  std::string trace, config, allocator, alloc_conf, contrast_alloc_conf, capacity, memory_limit, output;
  bool alloc_conf_given = false, contrast_given = false;
  int trace_device = -1;
  std::uint64_t workload = 0, steps = 0, max_replays = 0;
  double max_seconds = 120;
  bool no_coarsen = false, quiet = false, overwrite = false;
};

CLI::App* add_reduce_command(CLI::App& app, ReduceCliArgs& args);
// Exit status: 0 reduced (the folder written); 2 bad usage or input, or nothing to reduce (no OOM,
// or the contrast OOMs too); 1 when a check of the result failed (an internal error).
int run_reduce_command(ReduceCliArgs& args, const std::string& command_line);

}  // namespace gmb
