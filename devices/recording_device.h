// A Device that forwards every call to another and records the memory calls an allocator made:
// cudaMalloc / cudaFree of segments, and the map / unmap of expandable-segment pages. The
// snapshot self-check compares them with the segment_* events PyTorch recorded.
//
// A call's mark says which allocator call it came in: set by the caller before each (set_mark),
// or read when the device is called (a mark source: the run's allocator, counting its calls).
//
// A map that fails takes back the pages the same allocator call had mapped (as PyTorch's
// ExpandableSegment::map does on OOM, recording nothing): those maps and unmaps cancel and are
// not recorded.
#pragma once

#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "devices/device_call.h"
#include "devices/forwarding_device.h"

namespace gmb {

class RecordingDevice final : public ForwardingDevice {
 public:
  using MarkSource = std::function<std::uint64_t()>;
  explicit RecordingDevice(Device& inner, MarkSource mark_source = {})
      : ForwardingDevice(inner), mark_source_(std::move(mark_source)) {}

  const std::vector<DeviceCall>& calls() const { return calls_; }
  void set_mark(std::uint64_t mark) {
    mark_ = mark;
    if (!rollback_.empty()) rollback_.clear();  // clear() walks every bucket, even when empty
  }

 private:
  // The mark of the call being made (with a source, read now: device calls are few).
  std::uint64_t mark() {
    if (mark_source_) {
      const std::uint64_t m = mark_source_();
      if (m != mark_) set_mark(m);
    }
    return mark_;
  }
  std::optional<DevPtr> do_malloc(Bytes bytes) override {
    const std::uint64_t m = mark();
    auto p = inner().malloc(bytes);
    if (p) {
      sizes_[*p] = bytes;
      calls_.push_back({DeviceCall::Kind::Malloc, bytes, *p, m});
    }
    return p;
  }
  void do_free(DevPtr ptr) override {
    auto it = sizes_.find(ptr);
    calls_.push_back({DeviceCall::Kind::Free, it == sizes_.end() ? 0 : it->second, ptr, mark()});
    if (it != sizes_.end()) sizes_.erase(it);
    inner().free(ptr);
  }
  bool do_map(DevPtr addr, Bytes bytes) override {
    mark();
    if (!inner().map(addr, bytes)) {
      // The pages this call mapped just before, contiguous up to here, are about to be taken back.
      DevPtr end = addr;
      while (!calls_.empty() && calls_.back().kind == DeviceCall::Kind::Map && calls_.back().mark == mark_ &&
             calls_.back().address + calls_.back().bytes == end) {
        end = calls_.back().address;
        rollback_.insert(calls_.back().address);
        calls_.pop_back();
      }
      return false;
    }
    calls_.push_back({DeviceCall::Kind::Map, bytes, addr, mark_});
    return true;
  }
  void do_unmap(DevPtr addr, Bytes bytes) override {
    mark();
    if (!rollback_.erase(addr)) calls_.push_back({DeviceCall::Kind::Unmap, bytes, addr, mark_});
    inner().unmap(addr, bytes);
  }

  std::vector<DeviceCall> calls_;
  std::unordered_map<DevPtr, Bytes> sizes_;
  std::unordered_set<DevPtr> rollback_;
  MarkSource mark_source_;
  std::uint64_t mark_ = 0;
};

}  // namespace gmb
