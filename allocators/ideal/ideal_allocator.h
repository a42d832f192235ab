// ideal: the lower bound every other allocator is read against. Perfect packing: it holds
// exactly the live bytes (no segments, no rounding, no fragmentation, no device call), so its
// peak reserved is the workload's peak live bytes and an OOM means no allocator could have
// served that request at this capacity. With `rounding: pytorch` every request is first rounded
// as PyTorch's caching allocator rounds block sizes (512 bytes at least, then 512-byte steps):
// the offline bound for an allocator that rounds like PyTorch but never fragments.
// It never asks the device for memory: its pointers are handles, not addresses to touch (the
// runner gives a `lower_bound` allocator a simulated device; registry.h).
#pragma once

#include <memory>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

// Keys: rounding (none, pytorch).
std::vector<AllocatorOption> ideal_options();
void validate_ideal_options(const AllocatorOptions& options);
std::unique_ptr<InspectableAllocator> make_ideal_allocator(Device& device, const AllocatorOptions& options);

}  // namespace gmb
