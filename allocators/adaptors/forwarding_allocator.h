// An allocator that passes every call to another it owns: the base of the allocator adaptors
// (logging, statistics), which override only the calls they watch. Forwards end_of_step when the
// inner allocator is StepAware, so wrapping never changes what an allocator does at step ends.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "allocators/allocator.h"

namespace gmb {

class ForwardingAllocator : public InspectableAllocator, public StepAware {
 public:
  explicit ForwardingAllocator(std::unique_ptr<InspectableAllocator> inner) : inner_(std::move(inner)) {}

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override { return inner_->allocate(bytes, stream); }
  void deallocate(DevPtr ptr) override { inner_->deallocate(ptr); }
  void free_requested(DevPtr ptr) override { inner_->free_requested(ptr); }
  std::vector<DevPtr> take_returned_early() override { return inner_->take_returned_early(); }
  void empty_cache() override { inner_->empty_cache(); }
  void end_of_step(std::uint64_t step) override {
    if (StepAware* hook = step_aware(*inner_)) hook->end_of_step(step);
  }

  AllocatorStats stats() const override { return inner_->stats(); }
  MemoryInUse in_use() const override { return inner_->in_use(); }
  OomDetails last_oom() const override { return inner_->last_oom(); }
  std::vector<SegmentInfo> segments() const override { return inner_->segments(); }
  std::vector<SegmentInfo> block_map() const override { return inner_->block_map(); }
  std::optional<FreeSpace> free_space() const override { return inner_->free_space(); }
  std::vector<std::pair<std::string, std::int64_t>> memory_stats() const override { return inner_->memory_stats(); }
  std::string memory_summary() const override { return inner_->memory_summary(); }

  InspectableAllocator& inner() { return *inner_; }

 private:
  std::unique_ptr<InspectableAllocator> inner_;
};

}  // namespace gmb
