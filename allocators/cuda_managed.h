// cuda_managed: cudaMallocManaged per request. Never more managed bytes outstanding than
// the capacity (the card's free memory at start on the GPU): a request past that is an OOM
// recorded here that never reaches the driver, because oversubscribing managed memory can
// hang the GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

// Keys: prefetch (bool), preferred_location (bool), accessed_by (bool).
std::vector<std::string> cuda_managed_option_keys();
std::unique_ptr<Allocator> make_cuda_managed_allocator(Device& device, const AllocatorOptions& options);

}  // namespace gmb
