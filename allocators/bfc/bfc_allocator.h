// bfc: the policy of TensorFlow's BFCAllocator (xla/tsl/framework/bfc_allocator.cc, the GPU
// allocator of TensorFlow and JAX), behind the Allocator interface; its decisions are its own,
// the same code on the simulated device and the GPU.
//
// Best fit with coalescing: requests rounded up to 256 bytes; free chunks in 21 size bins
// (bfc_bins.h), each ordered by (size, address); a request takes the smallest free chunk that
// fits, from its own bin up, and splits it when the rest is at least the request or 128 MiB;
// a freed chunk merges with its free neighbours. Memory comes in regions (one cudaMalloc each):
//   allow_growth: true   the first region 2 MiB, then each new region twice the last one (or
//                        the request's size doubled up to), never past the memory limit;
//   allow_growth: false  one region of the whole memory limit, taken at the first request.
// A region that cannot be had at its size is asked for at 0.9x, again and again, down to the
// request (TF's back-pedal). On a request nothing can serve, garbage_collection frees the regions
// that hold no live chunk and tries one more region (TF's retry path; its 10 s wait for frees
// from other threads is not modeled: one thread frees nothing while waiting).
//
// Options (TF's names):
//   allow_growth                     true / false (TF's default: false)
//   per_process_gpu_memory_fraction  the memory limit as a fraction (0, 1] of the capacity
//   memory_limit                     the memory limit as a size (a virtual device's memory_limit)
//   garbage_collection               true / false (TF's GPU default, TF_ENABLE_GPU_GARBAGE_COLLECTION: true)
// Without memory_limit or a fraction the limit is TF's default: the capacity less its reserve
// for the system (225 MiB below 2 GiB, else 1800 MiB as for compute capability 9, the H200).
//
// Statistics: TF's bytes_in_use (= allocated), peak_bytes_in_use, bytes_reserved (region bytes
// = reserved), peak_bytes_reserved, bytes_limit, largest_alloc_size, num_allocs and
// largest_free_block_bytes, as memory_stats keys; its fragmentation metric is the report's
// "tf" family (docs/METRICS.md). empty_cache frees every region without a live chunk (TF has no
// such call; it is what its garbage collection does).
#pragma once

#include <memory>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

std::vector<AllocatorOption> bfc_options();
void validate_bfc_options(const AllocatorOptions& options);
std::unique_ptr<InspectableAllocator> make_bfc_allocator(Device& device, const AllocatorOptions& options);

// The memory limit (TF's total_memory) for these options on a device of this capacity.
Bytes bfc_memory_limit(const AllocatorOptions& options, Bytes capacity);

}  // namespace gmb
