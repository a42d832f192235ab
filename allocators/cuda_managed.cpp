#include "allocators/cuda_managed.h"

#include <fmt/format.h>

#include "allocators/option_parsing.h"
#include "allocators/tracking_allocator.h"

namespace gmb {
namespace {

// Managed bytes are charged in whole driver pages: the cap errs on the safe side.
class CudaManagedAllocator final : public TrackingAllocator {
 public:
  CudaManagedAllocator(Device& device, const AllocatorOptions& o)
      : TrackingAllocator(device, device.simulated()),
        prefetch_(option_bool(o, "prefetch", false)),
        preferred_location_(option_bool(o, "preferred_location", false)),
        accessed_by_(option_bool(o, "accessed_by", false)),
        cap_(safety_cap(device)) {}

  ~CudaManagedAllocator() override {
    for (auto& [ptr, live] : live_) device_.free_managed(ptr);
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
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
  Bytes page_round(Bytes b) const {
    Bytes page = device_.info().page_bytes;
    return (std::max<Bytes>(b, 1) + page - 1) / page * page;
  }
  bool prefetch_, preferred_location_, accessed_by_;
  Bytes cap_;
  Bytes outstanding_ = 0;
};

}  // namespace

std::vector<std::string> cuda_managed_option_keys() {
  return {"prefetch", "preferred_location", "accessed_by"};
}

std::unique_ptr<Allocator> make_cuda_managed_allocator(Device& device, const AllocatorOptions& options) {
  return std::make_unique<CudaManagedAllocator>(device, options);
}

}  // namespace gmb
