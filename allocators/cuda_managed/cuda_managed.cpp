#include "allocators/cuda_managed/cuda_managed.h"

#include <fmt/format.h>

#include "allocators/option_parsing.h"
#include "allocators/registry.h"
#include "allocators/tracking_allocator.h"
#include "devices/limit_device.h"

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
constexpr Bytes kManagedGranule = 64 * KiB;

// Never more than the capacity, nor than what was free when the allocator started.
Bytes safety_cap(const Device& device) {
  Bytes capacity = device.info().capacity_bytes, used = device.used_bytes();
  return used < capacity ? capacity - used : 0;
}

// The cap is a device adaptor under the allocator (base-from-member: it must exist before the
// TrackingAllocator base that keeps a reference to it).
struct ManagedCap {
  explicit ManagedCap(Device& device) : capped(device, safety_cap(device), kManagedGranule) {}
  LimitDevice capped;
};

class CudaManagedAllocator final : private ManagedCap, public TrackingAllocator {
 public:
  CudaManagedAllocator(Device& device, const ManagedOptions& o)
      : ManagedCap(device),
        TrackingAllocator(capped),
        prefetch_(o.prefetch),
        preferred_location_(o.preferred_location),
        accessed_by_(o.accessed_by) {}

  ~CudaManagedAllocator() override {
    live_.for_each([this](DevPtr ptr, const Live&) { device_.free_managed(ptr); });
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    if (bytes == 0) return DevPtr{0};  // nullptr, as cudaMallocManaged(0) gives (as cuda_malloc)
    if (refuse_larger_than_device(bytes, "cudaMallocManaged")) return std::nullopt;
    auto ptr = device_.malloc_managed(bytes);
    if (!ptr) {
      record_oom(bytes, capped.last_refused()
                            ? fmt::format("cudaMallocManaged of {} refused before reaching the driver: "
                                          "{} managed outstanding, cap {} (capacity, or free memory at start)",
                                          format_bytes(bytes), format_bytes(capped.outstanding()),
                                          format_bytes(capped.limit()))
                            : fmt::format("cudaMallocManaged of {} failed", format_bytes(bytes)));
      return std::nullopt;
    }
    if (preferred_location_ || accessed_by_)
      device_.advise_managed(*ptr, bytes, preferred_location_, accessed_by_);
    if (prefetch_) device_.prefetch_managed(*ptr, bytes, stream);
    record_alloc(*ptr, bytes, stream, true);
    set_reserved(capped.outstanding(), live_.size());
    return ptr;
  }

  void deallocate(DevPtr ptr) override {
    if (!record_free(ptr, true)) return;
    device_.free_managed(ptr);
    set_reserved(capped.outstanding(), live_.size());
  }

 private:
  bool prefetch_, preferred_location_, accessed_by_;
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
