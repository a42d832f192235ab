// --export-snapshot: the simulated run written as a PyTorch memory snapshot, so the what-if
// opens in PyTorch's own viewers (the memory_viz web page, python -m torch.cuda._memory_viz).
//
// The ops are replayed through the allocator on a simulated device of the given capacity (the
// same decisions as the run in the table when that ran on sim), and written as they happen:
// device_traces[0] holds alloc / free_requested / free_completed / segment_alloc / segment_free
// / segment_map / segment_unmap / oom entries, `segments` the allocator's segments and blocks at
// the end, `allocator_settings` the settings used. Pickle protocol 3, plain data only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "allocators/allocator.h"
#include "workloads/workload.h"

namespace gmb {

// Appends at most max ops to out; 0 at the end (a TraceSource's read, or a vector's chunks).
using OpReader = std::function<std::size_t(std::vector<Op>& out, std::size_t max)>;
// Where an op came from ("train.py:88 in forward"), "" if unknown: becomes the entry's frames.
using OpOrigin = std::function<std::string(const Op&)>;

struct SnapshotExportSummary {
  std::uint64_t entries = 0, ooms = 0, segments = 0;
};

// placements: where to put the segments the allocator asks for, while they agree
// (RecordedPlacementDevice; a snapshot's own, so a replay with its settings takes its blocks).
// capacity and card_bytes (0: the capacity) as the run's device has them, options as the run
// used them (with --capacity, the memory limit it sets: caching_allocator.h): the run's decisions.
// device: the GPU number the trace is written under (a replay of --trace-device 1 exports device
// 1's trace, after an empty one for device 0, so that its read-back names GPU 1 again).
// Writes the snapshot to `path` (a temporary file renamed at the end: nothing half-written).
// Throws std::runtime_error when the file cannot be written.
SnapshotExportSummary export_snapshot(const std::string& path, const OpReader& read, const std::string& allocator,
                                      const AllocatorOptions& options, Bytes capacity, const OpOrigin& origin = {},
                                      std::vector<std::pair<Bytes, DevPtr>> placements = {}, Bytes card_bytes = 0,
                                      int device = 0);

}  // namespace gmb
