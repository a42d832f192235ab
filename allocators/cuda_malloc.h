// cuda_malloc: one cudaMalloc per request, cudaFree on release (cudaFree synchronizes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

std::vector<std::string> cuda_malloc_option_keys();
std::unique_ptr<Allocator> make_cuda_malloc_allocator(Device& device, const AllocatorOptions& options);

}  // namespace gmb
