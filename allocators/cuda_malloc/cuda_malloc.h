// cuda_malloc: one cudaMalloc per request, cudaFree on release (cudaFree synchronizes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

std::vector<AllocatorOption> cuda_malloc_options();  // the option schema
void validate_cuda_malloc_options(const AllocatorOptions& options);
std::unique_ptr<InspectableAllocator> make_cuda_malloc_allocator(Device& device, const AllocatorOptions& options);

}  // namespace gmb
