// Name -> entry for every allocator: what it is (traits), which options it takes (schema), how
// to check them without a device, and how to make one. The names are part of the contract.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

// What a caller may know about an allocator without making one.
struct AllocatorTraits {
  // On the simulated device, reserved memory comes from a model of the driver (allocators whose
  // policy lives in the driver: cuda_malloc, cuda_managed, cuda_mempool), labelled `modeled`;
  // false: the allocator's own decisions, the same code as on the GPU, computed exactly.
  bool memory_modeled_on_sim = false;
  // Takes PyTorch's option string as the option `alloc_conf` (a snapshot's recorded settings
  // apply to it) and a memory limit as `memory_limit_bytes`.
  bool accepts_alloc_conf = false;
  // Makes PyTorch's CUDACachingAllocator's decisions, so a trace that OOMs through it OOMs at the
  // same event in real PyTorch: `reduce` writes a repro_torch.py for it.
  bool replayable_in_pytorch = false;
  // Runs on the simulated device. False: the GPU only (torch_caching: PyTorch's own allocator
  // asks the CUDA driver itself).
  bool runs_on_sim = true;
  // A bound, not an allocator one could use (`ideal`): it holds no device memory and its
  // pointers are handles, so the runner gives it a simulated device of the same capacity even
  // in a GPU run; its figures do not depend on the device.
  bool lower_bound = false;
  // Its device memory is what a PyTorch snapshot holds: cudaMalloc'd segments, or pages mapped
  // into one reserved range (expandable segments), so --export-snapshot can write its run.
  // False: vmm_stitch maps physical pieces into ranges of its own, which no snapshot entry says.
  bool exports_as_snapshot = true;
};

using AllocatorFactory =
    std::function<std::unique_ptr<InspectableAllocator>(Device&, const AllocatorOptions&)>;
// Throws OptionError for a bad key or value; touches no device and changes nothing.
using OptionValidator = void (*)(const AllocatorOptions&);

struct AllocatorEntry {
  std::string name;
  std::string summary;
  AllocatorTraits traits;
  std::vector<AllocatorOption> options;  // the schema: every valid key
  OptionValidator validate;
  AllocatorFactory factory;

  std::vector<std::string> option_keys() const;
  bool takes_option(std::string_view key) const;
};

const std::vector<AllocatorEntry>& allocator_registry();
const AllocatorEntry* find_allocator(std::string_view name);
std::string allocator_names();  // "cuda_malloc, cuda_managed, ..."
// The names of the entries with a trait, joined as allocator_names() does ("caching").
std::string allocator_names_where(bool AllocatorTraits::*trait);

// Throws std::invalid_argument for an unknown name, OptionError for a bad option.
std::unique_ptr<InspectableAllocator> make_allocator(std::string_view name, Device& device,
                                                     const AllocatorOptions& options);
// The same checks as make_allocator, without a device: side-effect free.
void validate_allocator_options(std::string_view name, const AllocatorOptions& options);
// The entry's traits; default traits (all false) for an unknown name.
AllocatorTraits allocator_traits(std::string_view name);
// Whether `allocator`'s reserved figures on this device come from a model (false for an unknown name).
bool memory_modeled(std::string_view allocator, bool simulated);
// Table label: "caching[expandable_segments:True]"; options in key order, "k=v" joined by ",".
std::string allocator_label(std::string_view name, const AllocatorOptions& options);

}  // namespace gmb
