// A Device that puts segments where a recording says the driver put them. PyTorch's allocator
// breaks ties between equal-size free blocks by address, so where the driver placed each
// cudaMalloc is an input of its decisions. A snapshot records every segment_alloc with its
// address: replaying it with those addresses makes the simulated run take the same blocks.
//
// Each cudaMalloc takes the next recorded (size, address) while the sizes agree and the recorded
// range is free here; from the first disagreement on (other settings, another allocator, or a
// run that freed a segment later than the recording did), addresses come from the inner device,
// moved above every recorded range (and above 2^52), so a moved segment never meets a recorded
// one. A recording of our own export sits above 2^52 itself, hence "above every recorded range",
// not a fixed base. Where no such room is left below 2^64, nothing is placed as recorded.
// Invariant: live segments never overlap (two live blocks with one address would be a wrong run).
// Memory is still taken from the inner device, so its capacity and accounting hold.
#pragma once

#include <algorithm>
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
      : ForwardingDevice(*inner), owned_(std::move(inner)), recorded_(std::move(segments)) {
    moved_base_ = kMinMovedBase;
    for (const auto& [bytes, addr] : recorded_) {
      // The end of the range, rounded up to 2 MiB, must leave kInnerSpan below 2^64.
      const DevPtr room = ~DevPtr(0) - kInnerSpan;
      if (addr > room || bytes > room - addr || round_up_2mib(addr + bytes) > room) {
        recorded_.clear();  // no room above it: place nothing as recorded
        moved_base_ = kMinMovedBase;
        break;
      }
      moved_base_ = std::max(moved_base_, round_up_2mib(addr + bytes));
    }
  }

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
      assert(*p < kInnerSpan);
      outer = *p + moved_base_;
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
  static DevPtr round_up_2mib(DevPtr a) { return (a + (2 * MiB - 1)) & ~DevPtr(2 * MiB - 1); }
  // Inner addresses (sim or a real GPU) lie below 2^52; moved ones lie at or above 2^52.
  static constexpr DevPtr kInnerSpan = DevPtr(1) << 52;
  static constexpr DevPtr kMinMovedBase = DevPtr(1) << 52;
  DevPtr moved_base_;  // what an inner address is moved by: above every recorded range
  std::unique_ptr<Device> owned_;  // the device ForwardingDevice forwards to
  std::vector<std::pair<Bytes, DevPtr>> recorded_;
  std::size_t next_ = 0;
  bool diverged_ = false;
  std::map<DevPtr, Segment> live_;  // live segments by the address handed out
};

}  // namespace gmb
