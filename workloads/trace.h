// Replay of a native allocation trace (CSV: action,id,bytes,stream; see DESIGN.md).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/workload.h"

namespace gmb {

// A malformed trace: names the file and line.
struct TraceError : std::runtime_error {
  TraceError(const std::string& file, std::uint64_t line, const std::string& message);
  std::string file;
  std::uint64_t line;
};

struct Trace {
  std::string path;
  std::vector<Op> ops;  // Alloc and Free only, source_line set
};

// Reads and validates a trace: header required, every free names a live id.
Trace read_trace(const std::string& path);
// Writes ops back in the native format (header included).
void write_trace(const std::string& path, const std::vector<Op>& ops);

// The whole trace is one step.
std::unique_ptr<Workload> make_trace_workload(Trace trace);

}  // namespace gmb
