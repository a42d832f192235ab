// Replay of a recorded allocation trace (any format open_trace reads; docs/TRACES.md), streamed:
// a trace "step" is a chunk of kTraceChunkOps ops, read on the runner's worker thread while the
// previous chunk replays, so memory does not grow with the trace's length. A step comes in
// pieces of kTracePieceOps (StepInfo::more): the ops of a piece (256 KiB) stay in the core's
// own cache from the reader through the need to the allocator, where a whole step's (2.5 MiB)
// would go out to the cache the cores share, and come back from it twice.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "workloads/trace_error.h"
#include "workloads/trace_source.h"
#include "workloads/workload.h"

namespace gmb {

constexpr std::size_t kTraceChunkOps = 65536;
constexpr std::size_t kTracePieceOps = 8192;

// Opens the trace (TraceError for a bad file or a bad start; errors later in the file surface
// from step_ops, naming the line or offset) and replays it chunk by chunk.
std::unique_ptr<Workload> make_trace_workload(const std::string& path, const TraceOpenOptions& options = {},
                                              std::size_t chunk_ops = kTraceChunkOps);

// Makes trace workloads of one file, each replaying it from the start: the file is opened
// (and checked: TraceError) here, once; a format read whole (a snapshot) is parsed here only
// and shared, a streamed one is opened again by each workload. Callable from several threads.
std::function<std::unique_ptr<Workload>()> trace_workload_factory(const std::string& path,
                                                                  const TraceOpenOptions& options = {});
// The same, from a reader already open (its meta() for the caller; no read() made yet).
std::function<std::unique_ptr<Workload>()> trace_workload_factory(const std::string& path,
                                                                  const TraceOpenOptions& options,
                                                                  const TraceSource& opened);

// A whole trace in memory: for tests and small tools.
struct Trace {
  std::string path;
  std::vector<Op> ops;  // Alloc and Free only, source_line set
};
Trace read_trace(const std::string& path);
// Replays a trace already in memory, in the same chunks.
std::unique_ptr<Workload> make_trace_workload(Trace trace, std::size_t chunk_ops = kTraceChunkOps);
// Writes ops in the native format (header included); checked through close.
void write_trace(const std::string& path, const std::vector<Op>& ops);

}  // namespace gmb
