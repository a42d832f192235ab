#include "allocators/registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "allocators/caching/caching_allocator.h"
#include "allocators/cuda_malloc.h"
#include "allocators/cuda_managed.h"
#include "allocators/cuda_mempool.h"

namespace gmb {

const std::vector<AllocatorEntry>& allocator_registry() {
  static const std::vector<AllocatorEntry> entries = {
      {"cuda_malloc", "one cudaMalloc per request, cudaFree on release", cuda_malloc_option_keys(),
       make_cuda_malloc_allocator},
      {"cuda_managed", "cudaMallocManaged per request, capped at the capacity",
       cuda_managed_option_keys(), make_cuda_managed_allocator},
      {"cuda_mempool", "cudaMallocAsync/cudaFreeAsync from an explicitly created cudaMemPool",
       cuda_mempool_option_keys(), make_cuda_mempool_allocator},
      {"caching", "PyTorch's CUDA caching allocator (native backend), same decisions",
       caching_option_keys(), make_caching_allocator},
  };
  return entries;
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

void check_option_keys(const AllocatorOptions& options, const std::vector<std::string>& valid) {
  for (const auto& [key, value] : options) {
    if (std::find(valid.begin(), valid.end(), key) == valid.end()) {
      std::string choices;
      for (const auto& v : valid) choices += (choices.empty() ? "" : ", ") + v;
      throw OptionError(key, fmt::format("unknown option '{}'", key),
                        choices.empty() ? "(this allocator takes no options)" : choices);
    }
  }
}

std::unique_ptr<Allocator> make_allocator(std::string_view name, Device& device,
                                          const AllocatorOptions& options) {
  const AllocatorEntry* entry = find_allocator(name);
  if (!entry)
    throw std::invalid_argument(
        fmt::format("unknown allocator '{}' (valid: {})", name, allocator_names()));
  check_option_keys(options, entry->option_keys);
  return entry->factory(device, options);
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
