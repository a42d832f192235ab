// A Device that puts segments where a recording says the driver put them. PyTorch's allocator
// breaks ties between equal-size free blocks by address, so where the driver placed each
// cudaMalloc is an input of its decisions. A snapshot records every segment_alloc with its
// address: replaying it with those addresses makes the simulated run take the same blocks.
//
// Each cudaMalloc takes the next recorded (size, address) while the sizes agree; from the first
// disagreement on (other settings, another allocator), addresses come from the inner device,
// moved above 2^52, where no recorded (user-space) address can be. Memory is still taken from the
// inner device, so its capacity and accounting hold.
#pragma once

#include <memory>
#include <unordered_map>
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
    if (!diverged_ && next_ < recorded_.size() && recorded_[next_].first == bytes) {
      outer = recorded_[next_++].second;
    } else {
      diverged_ = true;
      outer = *p + kMovedBase;
    }
    inner_of_[outer] = *p;
    return outer;
  }
  void do_free(DevPtr ptr) override {
    auto it = inner_of_.find(ptr);
    if (it == inner_of_.end()) return inner().free(ptr);
    DevPtr inner_ptr = it->second;
    inner_of_.erase(it);
    inner().free(inner_ptr);
  }

  static constexpr DevPtr kMovedBase = DevPtr(1) << 52;
  std::unique_ptr<Device> owned_;  // the device ForwardingDevice forwards to
  std::vector<std::pair<Bytes, DevPtr>> recorded_;
  std::size_t next_ = 0;
  bool diverged_ = false;
  std::unordered_map<DevPtr, DevPtr> inner_of_;
};

}  // namespace gmb
