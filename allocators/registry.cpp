#include "allocators/registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "allocators/bfc/bfc_allocator.h"
#include "allocators/caching/caching_allocator.h"
#include "allocators/cuda_malloc/cuda_malloc.h"
#include "allocators/cuda_managed/cuda_managed.h"
#include "allocators/cuda_mempool/cuda_mempool.h"
#include "allocators/ideal/ideal_allocator.h"
#include "allocators/vmm_stitch/vmm_stitch_allocator.h"
#ifdef GMB_HAS_TORCH_CACHING
#include "allocators/torch_caching/torch_caching.h"
#endif

namespace gmb {

const std::vector<AllocatorEntry>& allocator_registry() {
  // Native allocators: their policy lives in the driver, so on sim their memory is modeled.
  static const std::vector<AllocatorEntry> entries = {
      {"cuda_malloc", "one cudaMalloc per request, cudaFree on release",
       {/*memory_modeled_on_sim=*/true, /*accepts_alloc_conf=*/false},
       cuda_malloc_options(),
       validate_cuda_malloc_options, make_cuda_malloc_allocator},
      {"cuda_managed", "cudaMallocManaged per request, capped at the capacity",
       {/*memory_modeled_on_sim=*/true, /*accepts_alloc_conf=*/false},
       cuda_managed_options(),
       validate_cuda_managed_options, make_cuda_managed_allocator},
      {"cuda_mempool", "cudaMallocAsync/cudaFreeAsync from an explicitly created cudaMemPool",
       {/*memory_modeled_on_sim=*/true, /*accepts_alloc_conf=*/false},
       cuda_mempool_options(),
       validate_cuda_mempool_options, make_cuda_mempool_allocator},
      {"caching", "PyTorch's CUDA caching allocator (native backend), same decisions",
       {/*memory_modeled_on_sim=*/false, /*accepts_alloc_conf=*/true, /*replayable_in_pytorch=*/true},
       caching_options(),
       validate_caching_options, make_caching_allocator},
      {"bfc", "TensorFlow's BFCAllocator policy (best fit with coalescing, 21 bins, region growth)",
       {/*memory_modeled_on_sim=*/false, /*accepts_alloc_conf=*/false},
       bfc_options(),
       validate_bfc_options, make_bfc_allocator},
      {"vmm_stitch", "GMLake's virtual memory stitching: free physical chunks mapped into one new virtual range",
       {/*memory_modeled_on_sim=*/false, /*accepts_alloc_conf=*/false, /*replayable_in_pytorch=*/false,
        /*runs_on_sim=*/true, /*lower_bound=*/false, /*exports_as_snapshot=*/false},
       vmm_stitch_options(),
       validate_vmm_stitch_options, make_vmm_stitch_allocator},
      {"ideal", "the lower bound: the live bytes perfectly packed (no rounding unless asked, no fragmentation)",
       {/*memory_modeled_on_sim=*/false, /*accepts_alloc_conf=*/false, /*replayable_in_pytorch=*/false,
        /*runs_on_sim=*/true, /*lower_bound=*/true},
       ideal_options(),
       validate_ideal_options, make_ideal_allocator},
#ifdef GMB_HAS_TORCH_CACHING
      // Built only against an installed PyTorch (allocators/CMakeLists.txt, GMB_WITH_TORCH).
      {"torch_caching", "real PyTorch's CUDACachingAllocator (libc10_cuda), on the GPU only",
       {/*memory_modeled_on_sim=*/false, /*accepts_alloc_conf=*/true, /*replayable_in_pytorch=*/true,
        /*runs_on_sim=*/false, /*lower_bound=*/false, /*exports_as_snapshot=*/false},
       torch_caching_options(),
       validate_torch_caching_options, make_torch_caching_allocator},
#endif
  };
  return entries;
}

std::vector<std::string> AllocatorEntry::option_keys() const {
  std::vector<std::string> keys;
  for (const AllocatorOption& o : options) keys.push_back(o.key);
  return keys;
}

bool AllocatorEntry::takes_option(std::string_view key) const {
  return std::any_of(options.begin(), options.end(), [&](const AllocatorOption& o) { return o.key == key; });
}

const AllocatorEntry* find_allocator(std::string_view name) {
  for (const auto& e : allocator_registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::string allocator_names() {
  std::string out;
  for (const auto& e : allocator_registry()) out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

std::string allocator_names_where(bool AllocatorTraits::*trait) {
  std::string out;
  for (const auto& e : allocator_registry())
    if (e.traits.*trait) out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

AllocatorTraits allocator_traits(std::string_view name) {
  const AllocatorEntry* entry = find_allocator(name);
  return entry ? entry->traits : AllocatorTraits{};
}

void check_option_keys(const AllocatorOptions& options, const std::vector<AllocatorOption>& schema) {
  for (const auto& option : options) {
    const std::string& key = option.first;  // not a structured binding: clang's C++17 cannot capture one
    if (std::none_of(schema.begin(), schema.end(), [&](const AllocatorOption& o) { return o.key == key; })) {
      std::string choices;
      for (const auto& o : schema) choices += (choices.empty() ? "" : ", ") + o.key;
      throw OptionError(key, fmt::format("unknown option '{}'", key),
                        choices.empty() ? "(this allocator takes no options)" : choices);
    }
  }
}

namespace {

const AllocatorEntry& entry_or_throw(std::string_view name) {
  const AllocatorEntry* entry = find_allocator(name);
  if (!entry)
    throw std::invalid_argument(
        fmt::format("unknown allocator '{}' (valid: {})", name, allocator_names()));
  return *entry;
}

}  // namespace

void validate_allocator_options(std::string_view name, const AllocatorOptions& options) {
  const AllocatorEntry& entry = entry_or_throw(name);
  check_option_keys(options, entry.options);
  entry.validate(options);
}

std::unique_ptr<InspectableAllocator> make_allocator(std::string_view name, Device& device,
                                                     const AllocatorOptions& options) {
  const AllocatorEntry& entry = entry_or_throw(name);
  check_option_keys(options, entry.options);
  return entry.factory(device, options);
}

bool memory_modeled(std::string_view allocator, bool simulated) {
  const AllocatorEntry* entry = find_allocator(allocator);
  return simulated && entry && entry->traits.memory_modeled_on_sim;
}

std::string allocator_label(std::string_view name, const AllocatorOptions& options) {
  if (options.empty()) return std::string(name);
  std::string inner;
  for (const auto& [key, value] : options) {
    if (!inner.empty()) inner += ",";
    // PyTorch's option string is shown as it is written: caching[expandable_segments:True]
    inner += key == "alloc_conf" ? value : key + "=" + value;
  }
  return fmt::format("{}[{}]", name, inner);
}

}  // namespace gmb
