// A Device that puts segments where a recording says the driver put them. PyTorch's allocator
// breaks ties between equal-size free blocks by address, so where the driver placed each
// cudaMalloc is an input of its decisions. A snapshot records every segment_alloc with its
// address: replaying it with those addresses makes the simulated run take the same blocks.
//
// Each cudaMalloc takes the next recorded (size, address) while the sizes agree and the recorded
// range is free here; from the first disagreement on (other settings, another allocator, or a
// run that freed a segment later than the recording did), addresses are the inner device's,
// moved by an offset chosen then: 0 where no segment live here lies below 2^52 (where inner
// addresses lie), else above every live one. After the divergence no recorded address is
// handed out, so only the segments live at that moment can meet a moved one; a recording of
// our own export (moved addresses, above 2^52) is no different. Addresses stay below 2^63, as
// a snapshot holds them (signed 64-bit): where a recorded range ends within 2^52 of 2^63 (no
// room above it), nothing is placed as recorded.
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
    for (const auto& [bytes, addr] : recorded_)
      if (addr > kRoom || bytes > kRoom - addr || round_up_2mib(addr + bytes) > kRoom) {
        recorded_.clear();  // no room above it for moved addresses: place nothing as recorded
        break;
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
      if (!diverged_) diverge();
      assert(*p < kInnerSpan);
      outer = *p + offset_;
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

  // Chooses the offset of every address from here on. Every live segment is a recorded one
  // (none moved yet), and each lies below kRoom: [offset_, offset_ + 2^52) meets none of them.
  void diverge() {
    diverged_ = true;
    if (live_.empty() || live_.begin()->first >= kInnerSpan) return;  // offset 0: nothing below 2^52
    DevPtr top = 0;
    for (const auto& [addr, seg] : live_) top = std::max(top, addr + seg.bytes);
    offset_ = std::max(kInnerSpan, round_up_2mib(top));
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
  // Inner addresses (sim or a real GPU) lie below 2^52. A recorded range must end, rounded up to
  // 2 MiB, at most kRoom: an offset above it still leaves room for every inner address below
  // 2^63 (PyTorch writes addresses as signed 64-bit ints; so does the export).
  static constexpr DevPtr kInnerSpan = DevPtr(1) << 52;
  static constexpr DevPtr kRoom = (DevPtr(1) << 63) - 1 - kInnerSpan;
  std::unique_ptr<Device> owned_;  // the device ForwardingDevice forwards to
  std::vector<std::pair<Bytes, DevPtr>> recorded_;
  std::size_t next_ = 0;
  bool diverged_ = false;
  DevPtr offset_ = 0;  // added to the inner address once diverged
  std::map<DevPtr, Segment> live_;  // live segments by the address handed out
};

}  // namespace gmb
