// torch_caching: real PyTorch's CUDACachingAllocator (libc10_cuda), called through its C++ API, so
// a GPU run can put PyTorch's own figures beside `caching` (ours, which makes the same decisions)
// in one table. Built only where libtorch is found at configure time (GMB_WITH_TORCH); runs only
// on the GPU: PyTorch's allocator asks the CUDA driver itself and cannot be pointed at the sim.
//
// Options:
//   alloc_conf          PyTorch's option string, applied with its own settings parser
//                       (what PYTORCH_CUDA_ALLOC_CONF / torch.cuda.memory._set_allocator_settings do)
//   memory_limit_bytes  set_per_process_memory_fraction(limit / the card's total memory)
// PyTorch's allocator is one per process: a case empties its cache and resets its statistics when
// it starts and when it ends, and only one torch_caching allocator may exist at a time.
#pragma once

#include <memory>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

std::vector<AllocatorOption> torch_caching_options();
void validate_torch_caching_options(const AllocatorOptions& options);
// Throws std::runtime_error on a simulated device (and OptionError for a bad option).
std::unique_ptr<InspectableAllocator> make_torch_caching_allocator(Device& device, const AllocatorOptions& options);

}  // namespace gmb
