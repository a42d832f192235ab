#include "allocators/cuda_managed/cuda_managed.h"

#include <fmt/format.h>

#include "allocators/option_parsing.h"
#include "allocators/registry.h"
#include "allocators/tracking_allocator.h"

namespace gmb {
namespace {

struct ManagedOptions {
  bool prefetch, preferred_location, accessed_by;
};

ManagedOptions parse_managed_options(const AllocatorOptions& o) {
  check_option_keys(o, cuda_managed_options());
  return {option_bool(o, "prefetch", false), option_bool(o, "preferred_location", false),
          option_bool(o, "accessed_by", false)};
}

// Managed bytes are charged in 64 KiB granules, the GPU page size unified memory uses for
// small ranges (an assumption, not measured here). The safety rule is about what is asked of
// the driver: the bytes asked for never exceed the capacity, so the card is never asked for
// more managed memory than it has free. Charging whole 2 MiB pages instead refused a model's
// ~1000 small tensors (biases, norms) long before the memory was really short.
class CudaManagedAllocator final : public TrackingAllocator {
 public:
  CudaManagedAllocator(Device& device, const ManagedOptions& o)
      : TrackingAllocator(device),
        prefetch_(o.prefetch),
        preferred_location_(o.preferred_location),
        accessed_by_(o.accessed_by),
        cap_(safety_cap(device)) {}

  ~CudaManagedAllocator() override {
    for (auto& [ptr, live] : live_) device_.free_managed(ptr);
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    if (refuse_larger_than_device(bytes, "cudaMallocManaged")) return std::nullopt;
    Bytes charged = page_round(bytes);
    if (outstanding_ + charged > cap_) {
      // Refused here: the driver never sees a request that would oversubscribe the card.
      record_oom(bytes, fmt::format("cudaMallocManaged of {} refused before reaching the driver: "
                                    "{} managed outstanding, cap {} (capacity, or free memory at start)",
                                    format_bytes(bytes), format_bytes(outstanding_), format_bytes(cap_)));
      return std::nullopt;
    }
    auto ptr = device_.malloc_managed(bytes);
    if (!ptr) {
      record_oom(bytes, fmt::format("cudaMallocManaged of {} failed", format_bytes(bytes)));
      return std::nullopt;
    }
    if (preferred_location_ || accessed_by_)
      device_.advise_managed(*ptr, bytes, preferred_location_, accessed_by_);
    if (prefetch_) device_.prefetch_managed(*ptr, bytes, stream);
    outstanding_ += charged;
    record_alloc(*ptr, bytes, stream, true);
    set_reserved(outstanding_, live_.size());
    return ptr;
  }

  void deallocate(DevPtr ptr) override {
    auto live = record_free(ptr, true);
    if (!live) return;
    device_.free_managed(ptr);
    outstanding_ -= page_round(live->bytes);
    set_reserved(outstanding_, live_.size());
  }

 private:
  // Never more than the capacity, nor than what was free when the allocator started.
  static Bytes safety_cap(const Device& device) {
    Bytes capacity = device.info().capacity_bytes, used = device.used_bytes();
    return used < capacity ? capacity - used : 0;
  }
  static Bytes page_round(Bytes b) {
    constexpr Bytes kManagedGranule = 64 * KiB;
    return (std::max<Bytes>(b, 1) + kManagedGranule - 1) / kManagedGranule * kManagedGranule;
  }
  bool prefetch_, preferred_location_, accessed_by_;
  Bytes cap_;
  Bytes outstanding_ = 0;
};

}  // namespace

std::vector<AllocatorOption> cuda_managed_options() {
  return {{"prefetch", "true, false"}, {"preferred_location", "true, false"}, {"accessed_by", "true, false"}};
}

void validate_cuda_managed_options(const AllocatorOptions& options) { parse_managed_options(options); }

std::unique_ptr<InspectableAllocator> make_cuda_managed_allocator(Device& device, const AllocatorOptions& options) {
  return std::make_unique<CudaManagedAllocator>(device, parse_managed_options(options));
}

}  // namespace gmb
