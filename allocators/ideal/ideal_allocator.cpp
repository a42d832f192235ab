#include "allocators/ideal/ideal_allocator.h"

#include <unordered_map>

#include <fmt/format.h>

#include "allocators/caching/alloc_conf.h"
#include "allocators/tracking_allocator.h"
#include "common/units.h"

namespace gmb {
namespace {

bool parse_rounding(const AllocatorOptions& o) {
  check_option_keys(o, ideal_options());
  auto it = o.find("rounding");
  if (it == o.end() || it->second == "none") return false;
  if (it->second == "pytorch") return true;
  throw OptionError("rounding", fmt::format("'{}' is not a rounding", it->second), "none, pytorch");
}

class IdealAllocator final : public TrackingAllocator {
 public:
  IdealAllocator(Device& device, bool pytorch_rounding) : TrackingAllocator(device), pytorch_(pytorch_rounding) {}

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    if (bytes == 0) return DevPtr{0};
    if (refuse_larger_than_device(bytes, "ideal allocation")) return std::nullopt;
    const Bytes size = pytorch_ ? caching::round_to_min_block(bytes) : bytes;
    const Bytes capacity = device_.info().capacity_bytes;
    if (size > capacity || stats_.allocated_bytes > capacity - size) {
      record_oom(bytes, fmt::format("ideal: {} live plus {} is more than the capacity {}: no allocator "
                                    "could serve this request",
                                    format_bytes(stats_.allocated_bytes), format_bytes(size), format_bytes(capacity)));
      return std::nullopt;
    }
    const DevPtr ptr = kHandleBase + (next_handle_++ << 8);
    // Held bytes are exactly the live (rounded) bytes: reserved follows allocated both ways.
    record_alloc(ptr, size, stream, false);
    stats_.requested_bytes -= size - bytes;  // record_alloc counted the rounded size as requested
    rounded_[ptr] = size - bytes;
    set_reserved(stats_.allocated_bytes, 0);
    return ptr;
  }

  void deallocate(DevPtr ptr) override {
    if (ptr == 0) return;
    if (!record_free(ptr, false)) return;
    auto it = rounded_.find(ptr);
    stats_.requested_bytes += it->second;  // record_free took the rounded size off
    rounded_.erase(it);
    set_reserved(stats_.allocated_bytes, 0);
  }

  // No block view needed: nothing is ever free inside what it holds.
  std::optional<FreeSpace> free_space() const override {
    return FreeSpace{0, 0, stats_.allocated_bytes, stats_.requested_bytes};
  }

 private:
  // Handles far above any address a device hands out: a stray use faults instead of aliasing.
  static constexpr DevPtr kHandleBase = DevPtr{1} << 56;
  bool pytorch_;
  std::uint64_t next_handle_ = 1;
  std::unordered_map<DevPtr, Bytes> rounded_;  // live handle -> bytes added by rounding
};

}  // namespace

std::vector<AllocatorOption> ideal_options() { return {{"rounding", "none, pytorch"}}; }

void validate_ideal_options(const AllocatorOptions& options) { parse_rounding(options); }

std::unique_ptr<InspectableAllocator> make_ideal_allocator(Device& device, const AllocatorOptions& options) {
  return std::make_unique<IdealAllocator>(device, parse_rounding(options));
}

}  // namespace gmb
