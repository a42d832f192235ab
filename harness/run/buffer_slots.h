// Gives each live buffer of a workload a slot (Op::slot): a small number, reused once the buffer
// is freed, so that the runner and the need keep per-buffer state in plain arrays indexed by it
// instead of each hashing the workload's ids. Ids are hashed once here, on the thread that
// makes the steps (step_ops_ahead.h), not on the one that calls the allocator.
//
// The slots follow the ids as the BufferTable of the runner did: an alloc of an id that is live
// gets its slot again (the new buffer replaces the old one there), a free of a live id gets its
// slot and the id is no longer live, a free of an id that is not live gets slot 0 (no buffer).
// Slots of freed buffers are reused last-freed first; slot 0 is never given to a buffer.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "harness/run/buffer_table.h"
#include "workloads/workload.h"

namespace gmb {

class BufferSlots {
 public:
  static constexpr std::uint32_t kNone = 0;

  // Sets the slot of every alloc, free and free request of ops, in order (compute ops are left alone).
  void assign(std::vector<Op>& ops) {
    for (Op& op : ops) {
      if (op.kind == Op::Kind::Alloc) {
        const std::uint32_t fresh = free_.empty() ? next_ : free_.back();
        if (const auto live = ids_.put_if_absent(op.id, fresh)) {
          op.slot = static_cast<std::uint32_t>(*live);
          continue;
        }
        op.slot = fresh;
        if (!free_.empty()) {
          free_.pop_back();
        } else if (++next_ == 0) {
          throw std::length_error("more than 2^32 - 2 buffers live at once");
        }
      } else if (op.kind == Op::Kind::Free) {
        op.slot = static_cast<std::uint32_t>(ids_.take(op.id).value_or(kNone));
        if (op.slot != kNone) free_.push_back(op.slot);
      } else if (op.kind == Op::Kind::FreeRequested) {
        op.slot = static_cast<std::uint32_t>(ids_.find(op.id).value_or(kNone));  // kept until the free
      }
    }
  }

  // Every slot given so far is below this.
  std::uint32_t end() const { return next_; }

 private:
  BufferTable ids_;  // live id -> its slot
  std::vector<std::uint32_t> free_;
  std::uint32_t next_ = 1;
};

}  // namespace gmb
