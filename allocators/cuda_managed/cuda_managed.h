// cuda_managed: cudaMallocManaged per request. Never more managed bytes outstanding than
// the capacity (the card's free memory at start on the GPU): a request past that is an OOM
// that never reaches the driver (a LimitDevice under the allocator, devices/limit_device.h),
// because oversubscribing managed memory can hang the GPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

// Keys: prefetch (bool), preferred_location (bool), accessed_by (bool).
std::vector<AllocatorOption> cuda_managed_options();  // the option schema
void validate_cuda_managed_options(const AllocatorOptions& options);
std::unique_ptr<InspectableAllocator> make_cuda_managed_allocator(Device& device, const AllocatorOptions& options);

}  // namespace gmb
