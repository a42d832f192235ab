// What `gpumembench reduce` writes into its output folder: the reduced trace (native CSV), its
// block map at the OOM (SVG), summary.md, and repro_torch.py, a standalone script that replays
// the reduced trace in real PyTorch and says whether the OOM happens where gpumembench predicts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "harness/reduce/reduce.h"
#include "harness/run/results.h"

namespace gmb {

struct ReproducerInputs {
  std::string source;        // the input: a trace file, or "CONFIG (workload N)"
  std::string command_line;
  ReduceSettings settings;   // target and contrast
  Bytes memory_limit_bytes = 0;  // --memory-limit (0: the capacity is the limit)
  ReduceResult result;
  CaseResult input_case;     // the input replayed by the runner, up to its first OOM
  CaseResult reduced_case;   // the reduced trace replayed by the runner, with its block map
  std::optional<CaseResult> reduced_contrast_case;
  DeviceInfo device;
};

// "490,784": counts as the summary and the command line print them.
std::string with_commas(std::uint64_t v);
// The first run's first OOM, or null.
const OomRecord* first_oom(const CaseResult& c);

std::string reproducer_summary_md(const ReproducerInputs& in);
// Empty when the allocator is not `caching` (only PyTorch's own allocator can be checked in PyTorch).
std::string repro_torch_py(const ReproducerInputs& in);
// reduced_trace.csv, oom_block_map.svg, summary.md, repro_torch.py (caching only) into dir;
// each written to a temporary name and renamed. Returns the folder written ("repro/" is
// "repro"). Throws std::runtime_error naming the file.
std::string write_reproducer(const std::string& dir, const ReproducerInputs& in);
// Before the search: a --output folder that holds files is refused (std::invalid_argument, naming
// it and one of its files) unless `overwrite`, as a run's is. "" (the default folder) passes.
void check_reproducer_folder(const std::string& dir, bool overwrite);

}  // namespace gmb
