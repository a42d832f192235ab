#include "allocators/cuda_mempool.h"

#include <algorithm>

#include <fmt/format.h>

#include "allocators/option_parsing.h"
#include "allocators/tracking_allocator.h"

namespace gmb {
namespace {

class CudaMemPoolAllocator final : public TrackingAllocator {
 public:
  CudaMemPoolAllocator(Device& device, const AllocatorOptions& o)
      : TrackingAllocator(device, device.simulated()),
        trim_to_(option_size(o, "trim_to", 0)),
        trim_every_steps_(option_count(o, "trim_every_steps", 0)) {
    if (o.count("trim_to") && trim_every_steps_ == 0)
      throw OptionError("trim_to", "trim_to is the size each periodic trim keeps; it needs trim_every_steps",
                        "trim_every_steps: N (N >= 1) together with trim_to");
    MemPoolOptions p;
    p.release_threshold = option_size(o, "release_threshold", UINT64_MAX, true);
    p.reuse_follow_event_dependencies = option_bool(o, "reuse_follow_event_dependencies", true);
    p.reuse_allow_opportunistic = option_bool(o, "reuse_allow_opportunistic", true);
    p.reuse_allow_internal_dependencies = option_bool(o, "reuse_allow_internal_dependencies", true);
    pool_ = device.create_pool(p);
  }

  ~CudaMemPoolAllocator() override {
    for (auto& [ptr, live] : live_) device_.free_async(pool_, ptr, live.stream);
    device_.destroy_pool(pool_);
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
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

std::vector<std::string> cuda_mempool_option_keys() {
  return {"release_threshold", "trim_to", "trim_every_steps", "reuse_follow_event_dependencies",
          "reuse_allow_opportunistic", "reuse_allow_internal_dependencies"};
}

std::unique_ptr<Allocator> make_cuda_mempool_allocator(Device& device, const AllocatorOptions& options) {
  return std::make_unique<CudaMemPoolAllocator>(device, options);
}

}  // namespace gmb
