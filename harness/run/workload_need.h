// The workload's own need (WorkloadNeed, results.h): one pass over its events, before and apart
// from the timed runs, through the Workload interface only (step by step, so a streamed trace
// streams here too).
#pragma once

#include <cstdint>
#include <memory>

#include "harness/run/results.h"
#include "workloads/workload.h"

namespace gmb {

// PyTorch's rounding of a request (CUDACachingAllocator's round_size at default settings): a
// multiple of 512 bytes, at least 512. Blocks are not rounded further (segments are, but what
// a segment holds beyond its blocks is the allocator's choice, not the workload's need).
Bytes torch_rounded_size(Bytes requested);

// Walks steps 0 .. min(max_steps, num_steps()) - 1 (max_steps 0: all) of a workload that has
// not run yet. Frees of ids that are not live are ignored (a run without an OOM has none).
WorkloadNeed compute_workload_need(Workload& workload, std::uint64_t max_steps);

}  // namespace gmb
