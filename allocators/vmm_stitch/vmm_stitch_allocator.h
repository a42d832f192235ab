// vmm_stitch: GMLake-style virtual memory stitching (Guo et al., ASPLOS'24, "GMLake: Efficient
// and Transparent GPU Memory Defragmentation for Large-scale DNN Training with Virtual Memory
// Stitching"), over the driver's virtual memory calls (Device::create_physical, map_physical,
// reserve_address_range...). Its decisions are its own, the same code on sim and on the GPU;
// on sim only the call costs are modeled.
//
// Physical memory comes in chunks of `granularity` bytes (one cuMemCreate handle each, 2 MiB on
// the H200). A segment is a reserved virtual range with new chunks mapped one after another.
//  - pBlocks (primitive blocks): the runs of chunks inside one segment, handed out best fit (the
//    smallest free run that holds the request, the lowest address of equals) and split; a freed
//    run merges with its free neighbours in the segment.
//  - sBlocks (stitched blocks): a new virtual range onto which free chunks of several runs are
//    mapped one after another, so that one request gets contiguous addresses over scattered
//    physical memory. A freed sBlock stays mapped in a cache and is reused, best fit, for a
//    request of n chunks when it has at least n and at most n x reuse_limit chunks, all free
//    (its first n chunks are taken; the rest stay free for others).
// A request of `bytes` > 1 MiB is rounded up to the granularity (n chunks) and served by, in order:
//   1. the best-fitting free run (a hit);
//   2. the best-fitting cached sBlock (a hit);
//   3. a stitch, when the request is at least fragment_limit and the free chunks together hold
//      it: runs largest first, the last one cut to what is still needed (no new memory; when
//      no virtual range can be reserved, even after the cached sBlocks gave theirs back, an OOM);
//   4. new chunks: for a request of at least fragment_limit only as many as the free ones lack
//      (then stitched with all of them, or, with no free chunk at all, a new segment is the
//      block); below fragment_limit, a segment of the whole request;
//   5. when the device refuses a chunk (the chunks this request got go back): the small pool's
//      cache is emptied and (below fragment_limit) the segments with no used chunk are
//      released; if that gave memory back, step 4 once more; else an OOM, recorded.
// Stitched ranges (live and cached) above stitch_cache_limit bytes: the cached sBlocks are
// unmapped and their ranges freed, least recently released first (GMLake's garbage collection
// of stitched blocks; the physical chunks stay). empty_cache drops every cached sBlock and
// releases every segment with no used chunk, and empties the small pool's cache.
// Requests of at most 1 MiB (PyTorch's small pool) go to a `caching` allocator at default
// settings (2 MiB cudaMalloc segments), as GMLake leaves them to PyTorch's allocator.
// Ties (equal free runs, equal cached sBlocks, equal runs to stitch) go by creation order (the
// oldest segment or sBlock first; stitching takes the newest of equal runs first), not by
// address as GMLake's PyTorch block sets do: the driver places reserved ranges its own way, and
// the decisions must be the same on sim and on the GPU.
// One stream: blocks are not kept apart by stream (GMLake keeps them apart; the workloads here
// allocate on one stream).
//
// Options:
//   granularity         chunk size, a multiple of 2 MiB (and of the device's granularity),
//                       default 2 MiB
//   fragment_limit      the smallest rounded request that may be stitched (GMLake's fragLimit,
//                       512 MiB there); default 2 MiB: every request above the small pool
//   reuse_limit         a cached sBlock serves requests down to 1/reuse_limit of its size
//                       (GMLake's reuseLimit), a number >= 1, default 10
//   stitch_cache_limit  bytes of stitched virtual ranges kept before cached sBlocks are
//                       collected (GMLake's autoGC, in GiB there), default 1000 GiB; 0: none kept
// Statistics: PyTorch-style allocated/reserved (reserved: the physical chunks and the small
// pool's segments); device allocs/frees count segments made and released (each many
// cuMemCreate calls, one a chunk: the device's counters have those); memory_stats keys
// "vmm.*" (stitches, sBlock reuses, collected sBlocks, chunks, stitched bytes) and
// active_bytes.all.peak (= peak allocated: GMLake's fragmentation metric reads it).
#pragma once

#include <memory>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

std::vector<AllocatorOption> vmm_stitch_options();
void validate_vmm_stitch_options(const AllocatorOptions& options);
std::unique_ptr<InspectableAllocator> make_vmm_stitch_allocator(Device& device, const AllocatorOptions& options);

}  // namespace gmb
