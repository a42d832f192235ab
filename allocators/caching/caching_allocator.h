// PyTorch's CUDA caching allocator (native backend), same decisions as torch 2.11.
//
// Reimplemented from the behaviour of c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator):
// 512-byte rounding and roundup_power2_divisions; a small pool (requests <= 1 MiB, 2 MiB
// segments) and a large pool (20 MiB segments for requests < 10 MiB, otherwise the request
// rounded up to 2 MiB); best fit through sets ordered by (stream, size, address); PyTorch's
// split rules, max_split_size / max_non_split_rounding rules, block merging on free; the malloc
// path (free block -> garbage collection -> device allocation -> free oversize cached blocks
// and retry -> free all unsplit cached blocks and retry -> OOM); expandable segments; the
// memory limit of set_per_process_memory_fraction; and every memory_stats counter.
//
// Options (AllocatorOptions):
//   alloc_conf          PyTorch's option string, e.g. "expandable_segments:True,max_split_size_mb:128"
//   memory_limit_bytes  the allocator's memory limit in bytes (or a size such as "24GiB"):
//                       PyTorch's allowed_memory_maximum, checked before every device
//                       allocation. Default: per_process_memory_fraction x the card when
//                       alloc_conf sets a fraction < 1, else the device's capacity_bytes.
//                       (PyTorch without a fraction has no such check and no garbage
//                       collection; here a capacity always acts as the limit.)
// Streams: ids 0..65535; blocks belong to the stream that allocated them and are reused only
// on it. record_stream (cross-stream uses, CUDA events) and CUDA graph pools are not modeled.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

// Option keys: alloc_conf (PyTorch's PYTORCH_CUDA_ALLOC_CONF string), memory_limit_bytes.
std::vector<AllocatorOption> caching_options();  // the option schema
void validate_caching_options(const AllocatorOptions& options);  // no device, no side effect
std::unique_ptr<InspectableAllocator> make_caching_allocator(Device& device, const AllocatorOptions& options);

// A device capacity acts as the caching allocator's memory limit: PyTorch's
// set_per_process_memory_fraction on a card that is physically larger. Two things differ from a
// card of exactly the capacity, and a caller modelling that card must provide them:
//  - the card itself: expandable segments reserve address space for 1 1/8 of the card
//    (ExpandableSegment's constructor); once OOMs have unmapped pages mid-segment, a segment
//    sized for a small card runs out of room where PyTorch's does not;
//  - room above the limit: alloc_block checks the limit against the rounded request, then
//    try_allocate_expandable_block maps whole pages, so PyTorch can map up to one large-pool
//    page past the limit, which a device of exactly the capacity would refuse.
// caching_capacity_is_limit: whether the capacity is the limit (no memory_limit_bytes and no
// per_process_memory_fraction in the options). caching_limit_overshoot_bytes: the room to give
// the device above it (one large-pool page with expandable segments, else 0). Both throw
// OptionError on a bad alloc_conf.
bool caching_capacity_is_limit(const AllocatorOptions& options);
Bytes caching_limit_overshoot_bytes(const AllocatorOptions& options);

}  // namespace gmb
