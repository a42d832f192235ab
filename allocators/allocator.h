// The interfaces an allocator implements, in the style of RMM's memory_resource: a small core
// (Allocator: allocate, deallocate, empty_cache), inspection apart (AllocatorInspection: stats,
// the last OOM, the segment map), and StepAware for allocators that act at workload step
// boundaries. Every registry entry makes an InspectableAllocator (both of the first two).
// An allocator knows its Device and nothing about workloads, YAML or output formats.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "devices/device.h"

namespace gmb {

struct AllocatorStats {
  Bytes allocated_bytes = 0;   // PyTorch's allocated_bytes.all.current: bytes of live blocks
  Bytes reserved_bytes = 0;    // PyTorch's reserved_bytes.all.current: bytes held from the device
  Bytes requested_bytes = 0;   // bytes the callers asked for, before rounding
  Bytes peak_allocated_bytes = 0;
  Bytes peak_reserved_bytes = 0;
  std::uint64_t segments = 0;  // device allocations currently held
  std::uint64_t allocs = 0, frees = 0;
  std::uint64_t cache_hits = 0;      // allocations served without asking the device for memory
  std::uint64_t device_allocs = 0;   // cudaMalloc / map / cudaMallocAsync growth calls
  std::uint64_t device_frees = 0;
  std::uint64_t ooms = 0;
  std::uint64_t alloc_retries = 0;   // caching: num_alloc_retries
};

// Bytes in use now: what the runner samples after every event (cheaper than stats()).
struct MemoryInUse {
  Bytes allocated_bytes = 0;
  Bytes reserved_bytes = 0;
};

// One block inside a segment, for the segment/block map drawn at an OOM.
struct BlockInfo {
  Bytes offset = 0;
  Bytes size = 0;
  bool allocated = false;
  bool mapped = true;  // expandable segments: false for reserved-but-unmapped address space
};

struct SegmentInfo {
  DevPtr address = 0;
  Bytes size = 0;
  StreamId stream = 0;
  std::string pool;  // "small", "large", or "" where the allocator has no pools
  std::vector<BlockInfo> blocks;
};

// The free space inside the reserved memory as the allocator's own segments and blocks show it:
// what TensorFlow's BFC fragmentation metric and PyTorch memory_viz's internal/external split
// read (docs/METRICS.md). Only allocators with a block view have one.
struct FreeSpace {
  Bytes free_bytes = 0;          // reserved (mapped) bytes in no live block: external free bytes
  Bytes largest_free_bytes = 0;  // the largest free block
  Bytes allocated_bytes = 0;     // the live blocks' sizes
  Bytes requested_bytes = 0;     // what their callers asked for (allocated - requested: rounding)
};

// What the allocator knew when an allocation failed.
struct OomDetails {
  Bytes requested_bytes = 0;
  Bytes allocated_bytes = 0;
  Bytes reserved_bytes = 0;
  Bytes cached_bytes = 0;          // reserved but not allocated
  Bytes largest_free_block = 0;    // largest cached free block (0 where there is no cache)
  bool retried_after_freeing_cache = false;
  // The allocator's own memory limit (PyTorch's set_per_process_memory_fraction: the bytes it may
  // reserve); 0 where it has none but the device. An OOM is judged against the smaller of the two.
  Bytes limit_bytes = 0;
  std::string message;
};

// The core: what a workload asks of any allocator.
class Allocator {
 public:
  virtual ~Allocator() = default;

  // nullopt: out of memory, recorded (an OOM is a result). Never throws for OOM.
  virtual std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) = 0;
  virtual void deallocate(DevPtr ptr) = 0;
  // The caller freed ptr, but its memory must stay taken until deallocate(ptr), which follows
  // (another stream still uses it: PyTorch's record_stream). The default counts the block as
  // allocated until then; `caching` stops counting it here, as PyTorch's allocated_bytes does.
  virtual void free_requested(DevPtr ptr) { (void)ptr; }
  // The pointers of buffers whose free was requested that the allocator took back before their
  // deallocate: `caching`, as PyTorch does before it gives up on a request and in empty_cache
  // (it waits for the streams they wait on). Their deallocate must not come. Callers that request
  // frees take these after each allocate and empty_cache; run_calls (call_run.h) clears the slots
  // of its own blocks itself, and gives here only blocks allocated by the pointer API.
  virtual std::vector<DevPtr> take_returned_early() { return {}; }
  // Gives cached memory that no live block uses back to the device.
  virtual void empty_cache() {}
};

// What an allocator can tell about its memory. Invariants after every call:
// requested_bytes <= allocated_bytes <= reserved_bytes; the peaks are never below the currents.
class AllocatorInspection {
 public:
  virtual ~AllocatorInspection() = default;

  virtual AllocatorStats stats() const = 0;
  virtual MemoryInUse in_use() const {
    AllocatorStats s = stats();
    return {s.allocated_bytes, s.reserved_bytes};
  }
  virtual OomDetails last_oom() const = 0;
  virtual std::vector<SegmentInfo> segments() const { return {}; }
  // The picture drawn at an OOM: segments(), plus address space reserved but not mapped
  // (expandable segments) as blocks with mapped = false, where the allocator has any.
  virtual std::vector<SegmentInfo> block_map() const { return segments(); }
  // Its free space now, where it keeps its own blocks; nullopt where the free space lives in the
  // driver (cuda_malloc, cuda_managed, cuda_mempool: no block view). Cheap enough to call when
  // a peak moves, not after every call.
  virtual std::optional<FreeSpace> free_space() const { return std::nullopt; }
  // PyTorch-style memory_stats keys where the allocator has them ("allocated_bytes.all.current"...).
  virtual std::vector<std::pair<std::string, std::int64_t>> memory_stats() const { return {}; }
  // A memory_summary()-style text.
  virtual std::string memory_summary() const { return {}; }
};

// An allocator that acts at workload step boundaries (periodic trims and the like): the runner
// calls end_of_step after every step on the allocators that implement it.
class StepAware {
 public:
  virtual ~StepAware() = default;
  virtual void end_of_step(std::uint64_t step) = 0;
};

// What the registry makes: an allocator that can be inspected.
class InspectableAllocator : public Allocator, public AllocatorInspection {};

// The allocator's StepAware side, or nullptr.
inline StepAware* step_aware(Allocator& a) { return dynamic_cast<StepAware*>(&a); }

// Allocator options as written by a person: key -> value text. Factories parse and validate.
using AllocatorOptions = std::map<std::string, std::string>;

// Thrown by an allocator for a run its model does not cover (e.g. thousands of streams in
// `caching`): the case fails with this message, and a sweep goes on with the other cases.
struct AllocatorModelLimit : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by a factory for a bad option: names the key and lists the valid choices.
struct OptionError : std::invalid_argument {
  OptionError(std::string key_, const std::string& message, std::string valid_)
      : std::invalid_argument(message), key(std::move(key_)), valid(std::move(valid_)) {}
  std::string key;    // the option key at fault
  std::string valid;  // the valid keys or values, for the error message
};

// One option key an allocator takes and the values it accepts, as an error message lists them.
struct AllocatorOption {
  std::string key;
  std::string valid;
};

// Rejects keys that are not in the schema (throws OptionError naming the key and the valid keys).
void check_option_keys(const AllocatorOptions& options, const std::vector<AllocatorOption>& schema);

}  // namespace gmb
