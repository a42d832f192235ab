// RMM-style statistics adaptor: wraps any allocator and counts what passes through its interface,
// independently of the allocator's own bookkeeping: bytes and allocations live now, at peak and in
// total, and failed allocations. The bytes are the bytes asked for (before any rounding), so
// peak().bytes is what an allocator that packs perfectly would need. The conformance suite checks
// every allocator's own statistics against it.
#pragma once

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "allocators/adaptors/forwarding_allocator.h"

namespace gmb {

struct InterfaceCounts {
  Bytes bytes = 0;                 // live bytes asked for
  std::uint64_t allocations = 0;   // live allocations
};

class StatisticsAllocator final : public ForwardingAllocator {
 public:
  explicit StatisticsAllocator(std::unique_ptr<InspectableAllocator> inner) : ForwardingAllocator(std::move(inner)) {}

  InterfaceCounts current() const { return current_; }
  InterfaceCounts peak() const { return peak_; }  // each field's own maximum
  InterfaceCounts total() const { return total_; }
  std::uint64_t failed() const { return failed_; }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    const std::optional<DevPtr> ptr = ForwardingAllocator::allocate(bytes, stream);
    if (!ptr) {
      ++failed_;
      return ptr;
    }
    live_[*ptr] = bytes;
    current_.bytes += bytes;
    ++current_.allocations;
    total_.bytes += bytes;
    ++total_.allocations;
    peak_.bytes = std::max(peak_.bytes, current_.bytes);
    peak_.allocations = std::max(peak_.allocations, current_.allocations);
    return ptr;
  }
  void deallocate(DevPtr ptr) override {
    auto it = live_.find(ptr);
    if (it != live_.end()) {  // a pointer this adaptor never handed out is passed on uncounted
      current_.bytes -= it->second;
      --current_.allocations;
      live_.erase(it);
    }
    ForwardingAllocator::deallocate(ptr);
  }

 private:
  std::unordered_map<DevPtr, Bytes> live_;
  InterfaceCounts current_, peak_, total_;
  std::uint64_t failed_ = 0;
};

}  // namespace gmb
