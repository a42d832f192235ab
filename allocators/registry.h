// Name -> factory for every allocator. The names are part of the contract (DESIGN.md).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

using AllocatorFactory =
    std::function<std::unique_ptr<Allocator>(Device&, const AllocatorOptions&)>;

struct AllocatorEntry {
  std::string name;
  std::string summary;
  std::vector<std::string> option_keys;  // the valid keys, for error messages and --help
  AllocatorFactory factory;
};

const std::vector<AllocatorEntry>& allocator_registry();
const AllocatorEntry* find_allocator(std::string_view name);
std::string allocator_names();  // "cuda_malloc, cuda_managed, ..."

// Throws std::invalid_argument for an unknown name, OptionError for a bad option.
std::unique_ptr<Allocator> make_allocator(std::string_view name, Device& device,
                                          const AllocatorOptions& options);
// Rejects keys that are not in `valid` (throws OptionError naming the key and the valid keys).
void check_option_keys(const AllocatorOptions& options, const std::vector<std::string>& valid);
// Table label: "caching[expandable_segments:True]"; options in key order, "k=v" joined by ",".
std::string allocator_label(std::string_view name, const AllocatorOptions& options);

}  // namespace gmb
