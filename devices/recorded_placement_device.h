// A Device that puts segments where a recording says the driver put them. PyTorch's allocator
// breaks ties between equal-size free blocks by address, so where the driver placed each
// cudaMalloc is an input of its decisions. A snapshot records every segment_alloc with its
// address: replaying it with those addresses makes the simulated run take the same blocks.
//
// Each cudaMalloc takes the next recorded (size, address) while the sizes agree and the recorded
// range is free here; from the first disagreement on (other settings, another allocator, or a
// run that freed a segment later than the recording did), addresses come from the inner device,
// moved above 2^52, where no recorded (user-space) address can be. Invariant: live segments
// never overlap (a recorded address still held here would give two live blocks one address).
// Memory is still taken from the inner device, so its capacity and accounting hold.
#pragma once

#include <cassert>
#include <iterator>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "devices/forwarding_device.h"

namespace gmb {

class RecordedPlacementDevice final : public ForwardingDevice {
 public:
  // segments: (bytes, address) of each recorded cudaMalloc, in order.
  RecordedPlacementDevice(std::unique_ptr<Device> inner, std::vector<std::pair<Bytes, DevPtr>> segments)
      : ForwardingDevice(*inner), owned_(std::move(inner)), recorded_(std::move(segments)) {}

  bool diverged() const { return diverged_; }
  std::size_t placed() const { return next_; }

 private:
  std::optional<DevPtr> do_malloc(Bytes bytes) override {
    auto p = inner().malloc(bytes);
    if (!p) return p;
    DevPtr outer;
    if (!diverged_ && next_ < recorded_.size() && recorded_[next_].first == bytes &&
        !overlaps_live(recorded_[next_].second, bytes)) {
      outer = recorded_[next_++].second;
    } else {
      diverged_ = true;
      outer = *p + kMovedBase;
    }
    assert(!overlaps_live(outer, bytes));
    live_[outer] = Segment{*p, bytes};
    return outer;
  }
  void do_free(DevPtr ptr) override {
    auto it = live_.find(ptr);
    if (it == live_.end()) return inner().free(ptr);
    DevPtr inner_ptr = it->second.inner;
    live_.erase(it);
    inner().free(inner_ptr);
  }

  // Whether [addr, addr + bytes) meets a live segment.
  bool overlaps_live(DevPtr addr, Bytes bytes) const {
    auto next = live_.lower_bound(addr);
    if (next != live_.end() && next->first < addr + bytes) return true;
    return next != live_.begin() && std::prev(next)->first + std::prev(next)->second.bytes > addr;
  }

  struct Segment {
    DevPtr inner;  // the inner device's pointer
    Bytes bytes;
  };
  static constexpr DevPtr kMovedBase = DevPtr(1) << 52;
  std::unique_ptr<Device> owned_;  // the device ForwardingDevice forwards to
  std::vector<std::pair<Bytes, DevPtr>> recorded_;
  std::size_t next_ = 0;
  bool diverged_ = false;
  std::map<DevPtr, Segment> live_;  // live segments by the address handed out
};

}  // namespace gmb
