// PyTorch's allocator option string (PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF), parsed the
// way torch 2.11 parses it for the native CUDA caching allocator:
//   "expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4]"
// The keys, defaults, limits and error messages follow c10's AcceleratorAllocatorConfig and
// CUDAAllocatorConfig. Keys that only concern other parts of PyTorch (the pinned host
// allocator, graph capture, lock release around cudaMalloc) are accepted and validated but have
// no effect here. Where PyTorch's tokenizer is lenient (it does not check the ':' and ','
// separators and reads "128abc" as 128), this parser rejects the string instead.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "devices/device.h"

namespace gmb::caching {

constexpr Bytes kMinBlockSize = 512;            // every size is rounded up to 512 bytes

// PyTorch's block size for a request under the default rounding (no roundup_power2_divisions):
// at least kMinBlockSize, else the next multiple of it. Saturates at 2^64 - 1 (more than any
// card) instead of wrapping. The caching allocator, the `ideal` bound and the workload's need
// all round through this one function.
constexpr Bytes round_to_min_block(Bytes size) {
  if (size < kMinBlockSize) return kMinBlockSize;
  if (size > UINT64_MAX - kMinBlockSize) return UINT64_MAX;
  return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}
constexpr Bytes kSmallSize = 1 * MiB;           // largest request served by the small pool
constexpr Bytes kSmallBuffer = 2 * MiB;         // small-pool segment size
constexpr Bytes kDefaultLargeBuffer = 20 * MiB; // large-pool segment for requests < kMinLargeAlloc
constexpr Bytes kMinLargeAlloc = 10 * MiB;
constexpr Bytes kRoundLarge = 2 * MiB;          // larger requests are rounded up to 2 MiB
constexpr std::size_t kRoundupIntervals = 16;   // power-of-two intervals 1 MiB .. 64 GiB

struct CachingConfig {
  std::string text;  // the option string as given
  Bytes max_split_size = UINT64_MAX;               // max_split_size_mb (default: unlimited)
  Bytes max_non_split_rounding_size = kDefaultLargeBuffer;  // max_non_split_rounding_mb
  Bytes large_segment_size = kDefaultLargeBuffer;  // large_segment_size_mb
  std::array<Bytes, kRoundupIntervals> roundup_power2_divisions{};  // 0: no power-of-2 rounding
  double garbage_collection_threshold = 0.0;       // 0: off
  bool expandable_segments = false;
  double per_process_memory_fraction = 1.0;        // CUDA key; < 1 sets a memory limit
  std::string backend = "native";
  // Accepted, validated, no effect on allocation decisions:
  bool release_lock_on_cudamalloc = false;
  bool pinned_use_cuda_host_register = false;
  bool pinned_use_background_threads = false;
  std::uint64_t pinned_num_register_threads = 1;
  std::uint64_t pinned_reserve_segment_size_mb = 0;
  bool graph_capture_record_stream_reuse = false;
  bool pinned_free_catch_all = false;
  bool throw_on_cudamalloc_oom = false;

  // Number of power-of-two divisions used to round a request of `size` bytes (index by the
  // request's power-of-two interval, starting at 1 MiB).
  Bytes divisions_for(Bytes size) const {
    int log_size = 63 - __builtin_clzll(size | 1);
    std::size_t index = log_size > 20 ? static_cast<std::size_t>(log_size - 20) : 0;
    if (index > kRoundupIntervals - 1) index = kRoundupIntervals - 1;
    return roundup_power2_divisions[index];
  }
};

// Every key torch 2.11 accepts in the native backend's option string.
const std::vector<std::string>& alloc_conf_keys();
std::string alloc_conf_keys_text();  // "backend, expandable_segments, ..."

// Parses an option string. Throws OptionError (key "alloc_conf") with PyTorch's message for a
// value PyTorch rejects, and for an unknown key or a malformed string.
CachingConfig parse_alloc_conf(std::string_view text);

// Whether two option strings make the same allocation decisions (spaces, key order and keys
// without effect aside): "roundup_power2_divisions: 4" is "roundup_power2_divisions:4". False
// where either does not parse.
bool same_decisions(std::string_view a, std::string_view b);

}  // namespace gmb::caching
