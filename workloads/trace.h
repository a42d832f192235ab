// Replay of a recorded allocation trace (any format open_trace reads; docs/TRACES.md).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/trace_error.h"
#include "workloads/trace_source.h"
#include "workloads/workload.h"

namespace gmb {


struct Trace {
  std::string path;
  std::vector<Op> ops;  // Alloc and Free only, source_line set
};

// Reads a whole trace of any format (open_trace) into memory: for tests and small tools.
Trace read_trace(const std::string& path);
// Writes ops back in the native format (header included).
void write_trace(const std::string& path, const std::vector<Op>& ops);

// The whole trace is one step.
std::unique_ptr<Workload> make_trace_workload(Trace trace);

}  // namespace gmb
