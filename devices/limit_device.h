// A device wrapper that caps the memory taken through it: a cudaMalloc or cudaMallocManaged that
// would take the bytes outstanding past the limit is refused here, before the driver sees it (it
// returns no pointer, as an out-of-memory driver would, and is not counted as a driver call).
// Bytes are charged rounded up to a granule (managed memory: the page size the driver charges).
//
// Which allocators use it: cuda_managed, whose cap must hold before the driver is asked, because
// oversubscribing managed memory can hang the GPU. PyTorch's own memory limit stays inside
// `caching`: it decides when that allocator frees its cache and retries, which a device cannot see.
// Pool allocations (cudaMallocAsync) and mapped pages pass through uncharged: their physical
// growth is the driver's business and the allocators that use them account for it themselves.
#pragma once

#include "common/live_map.h"
#include "devices/forwarding_device.h"

namespace gmb {

class LimitDevice final : public ForwardingDevice {
 public:
  // granule > 0. Invariant: outstanding() <= limit() after every call.
  LimitDevice(Device& inner, Bytes limit, Bytes granule) : ForwardingDevice(inner), limit_(limit), granule_(granule) {}

  Bytes limit() const { return limit_; }
  Bytes outstanding() const { return outstanding_; }
  // Whether the last malloc / malloc_managed was refused by the limit (not failed by the driver).
  bool last_refused() const { return last_refused_; }

 private:
  std::optional<DevPtr> do_malloc(Bytes bytes) override {
    return charged(bytes, [&] { return inner().malloc(bytes); });
  }
  void do_free(DevPtr ptr) override {
    given_back(ptr);
    inner().free(ptr);
  }
  std::optional<DevPtr> do_malloc_managed(Bytes bytes) override {
    return charged(bytes, [&] { return inner().malloc_managed(bytes); });
  }
  void do_free_managed(DevPtr ptr) override {
    given_back(ptr);
    inner().free_managed(ptr);
  }

  // bytes rounded up to the granule; a request too large to round is larger than any limit.
  Bytes charge_of(Bytes bytes) const {
    const Bytes b = bytes == 0 ? 1 : bytes;
    if (b > kMaxDeviceBytes) return kMaxDeviceBytes + 1;
    return (b + granule_ - 1) / granule_ * granule_;
  }
  template <class Take>
  std::optional<DevPtr> charged(Bytes bytes, Take take) {
    const Bytes charge = charge_of(bytes);
    last_refused_ = charge > limit_ || outstanding_ > limit_ - charge;
    if (last_refused_) return std::nullopt;
    std::optional<DevPtr> ptr = take();
    if (ptr) {
      charges_.put(*ptr, charge);
      outstanding_ += charge;
    }
    return ptr;
  }
  void given_back(DevPtr ptr) {
    Bytes charge = 0;
    if (charges_.take(ptr, charge)) outstanding_ -= charge;
  }

  Bytes limit_, granule_;
  Bytes outstanding_ = 0;
  bool last_refused_ = false;
  LiveMap<Bytes> charges_;  // live allocations: what each was charged
};

}  // namespace gmb
