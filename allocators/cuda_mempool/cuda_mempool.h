// cuda_mempool: cudaMallocAsync / cudaFreeAsync from a pool made with cudaMemPoolCreate
// (not the device's default pool). The release threshold defaults to max, as PyTorch and
// RMM set it; CUDA's own default is 0 (memory goes back to the driver at every sync).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

// Keys: release_threshold (size or max), trim_to (size), trim_every_steps (count, 0 = never),
// reuse_follow_event_dependencies, reuse_allow_opportunistic, reuse_allow_internal_dependencies.
std::vector<AllocatorOption> cuda_mempool_options();  // the option schema
void validate_cuda_mempool_options(const AllocatorOptions& options);
std::unique_ptr<InspectableAllocator> make_cuda_mempool_allocator(Device& device, const AllocatorOptions& options);

}  // namespace gmb
