#include "allocators/cuda_mempool/cuda_mempool.h"

#include <algorithm>

#include <fmt/format.h>

#include "allocators/option_parsing.h"
#include "allocators/registry.h"
#include "allocators/tracking_allocator.h"

namespace gmb {
namespace {

struct PoolAllocatorOptions {
  MemPoolOptions pool;
  Bytes trim_to = 0;
  std::uint64_t trim_every_steps = 0;  // 0: never
};

PoolAllocatorOptions parse_pool_options(const AllocatorOptions& o) {
  check_option_keys(o, cuda_mempool_options());
  PoolAllocatorOptions p;
  p.trim_to = option_size(o, "trim_to", 0);
  p.trim_every_steps = option_count(o, "trim_every_steps", 0);
  if (o.count("trim_to") && p.trim_every_steps == 0)
    throw OptionError("trim_to", "trim_to is the size each periodic trim keeps; it needs trim_every_steps",
                      "trim_every_steps: N (N >= 1) together with trim_to");
  p.pool.release_threshold = option_size(o, "release_threshold", UINT64_MAX, true);
  p.pool.reuse_follow_event_dependencies = option_bool(o, "reuse_follow_event_dependencies", true);
  p.pool.reuse_allow_opportunistic = option_bool(o, "reuse_allow_opportunistic", true);
  p.pool.reuse_allow_internal_dependencies = option_bool(o, "reuse_allow_internal_dependencies", true);
  return p;
}

// Trims at the end of every trim_every_steps-th workload step (StepAware).
class CudaMemPoolAllocator final : public TrackingAllocator, public StepAware {
 public:
  CudaMemPoolAllocator(Device& device, const PoolAllocatorOptions& o)
      : TrackingAllocator(device), trim_to_(o.trim_to), trim_every_steps_(o.trim_every_steps) {
    pool_ = device.create_pool(o.pool);
  }

  ~CudaMemPoolAllocator() override {
    live_.for_each([this](DevPtr ptr, const Live& live) { device_.free_async(pool_, ptr, live.stream); });
    device_.destroy_pool(pool_);
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    if (bytes == 0) return DevPtr{0};  // nullptr, as cudaMallocFromPoolAsync(0) gives (as cuda_malloc)
    if (refuse_larger_than_device(bytes, "cudaMallocAsync")) return std::nullopt;
    Bytes before = device_.pool_usage(pool_).reserved_current;
    auto ptr = device_.malloc_async(pool_, bytes, stream);
    if (!ptr) {
      record_oom(bytes, fmt::format("cudaMallocAsync of {} failed: out of memory", format_bytes(bytes)));
      return std::nullopt;
    }
    MemPoolUsage after = device_.pool_usage(pool_);
    record_alloc(*ptr, bytes, stream, after.reserved_current > before);
    refresh(after);
    return ptr;
  }

  void deallocate(DevPtr ptr) override {
    auto live = record_free(ptr, false);
    if (!live) return;
    device_.free_async(pool_, ptr, live->stream);
    refresh(device_.pool_usage(pool_));
  }

  void empty_cache() override { trim(0); }

  void end_of_step(std::uint64_t step) override {
    if (trim_every_steps_ == 0 || (step + 1) % trim_every_steps_ != 0) return;
    trim(trim_to_);
  }

  std::vector<std::pair<std::string, std::int64_t>> memory_stats() const override {
    MemPoolUsage u = device_.pool_usage(pool_);
    return {{"pool.reserved_mem_current", static_cast<std::int64_t>(u.reserved_current)},
            {"pool.reserved_mem_high", static_cast<std::int64_t>(u.reserved_high)},
            {"pool.used_mem_current", static_cast<std::int64_t>(u.used_current)},
            {"pool.used_mem_high", static_cast<std::int64_t>(u.used_high)}};
  }

 private:
  // Reserved figures are the pool's own attributes (ReservedMemCurrent / ReservedMemHigh).
  void refresh(const MemPoolUsage& u) {
    set_reserved(u.reserved_current, 0);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, u.reserved_high);
  }

  void trim(Bytes keep) {
    Bytes before = device_.pool_usage(pool_).reserved_current;
    device_.synchronize();  // frees complete in stream order (and the threshold applies); trim after
    device_.trim_pool(pool_, keep);
    MemPoolUsage after = device_.pool_usage(pool_);
    if (after.reserved_current < before) ++stats_.device_frees;
    refresh(after);
  }

  Device::PoolHandle pool_;
  Bytes trim_to_;
  std::uint64_t trim_every_steps_;
};

}  // namespace

std::vector<AllocatorOption> cuda_mempool_options() {
  return {{"release_threshold", "a size such as 512MiB, 1GB, 4096, or max"},
          {"trim_to", "a size such as 512MiB, 1GB, 4096"},
          {"trim_every_steps", "0, 1, 2, ... (0: never)"},
          {"reuse_follow_event_dependencies", "true, false"},
          {"reuse_allow_opportunistic", "true, false"},
          {"reuse_allow_internal_dependencies", "true, false"}};
}

void validate_cuda_mempool_options(const AllocatorOptions& options) { parse_pool_options(options); }

std::unique_ptr<InspectableAllocator> make_cuda_mempool_allocator(Device& device, const AllocatorOptions& options) {
  return std::make_unique<CudaMemPoolAllocator>(device, parse_pool_options(options));
}

}  // namespace gmb
