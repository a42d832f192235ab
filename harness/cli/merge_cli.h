// The `merge` subcommand (merge_cli.cpp): the case files of several run folders (shards of a
// sweep, nodes, an interrupted run and its rerun) into one folder with the tables a run of the
// whole sweep writes.
#pragma once

#include <string>
#include <vector>

#include "harness/cli/run_plan.h"

namespace CLI {
class App;
}

namespace gmb {

struct MergeCliArgs {
  std::vector<std::string> dirs;
  std::string output, format, baseline, metrics;
  bool overwrite = false, allow_mixed = false, quiet = false;
  RunArgs plan;  // --config and the flags that decide its cases (--device, --capacity, --steps, --allocator)
};

CLI::App* add_merge_command(CLI::App& app, MergeCliArgs& args);
// Exit status: 0 merged, every case there and none failed; 1 merged, but cases of the plan are
// missing or failed (listed); 2 bad usage or case files that cannot be joined (nothing written).
int run_merge_command(const MergeCliArgs& args, const std::string& command_line);

}  // namespace gmb
