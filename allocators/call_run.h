// CallRunner: many allocate/deallocate calls in one virtual call, for a harness that replays
// millions of events (harness/run/runner.cpp). Three virtual calls an event (allocate or
// deallocate, then in_use) cost about a tenth of a cached allocation, and keep the caller's
// bookkeeping in memory instead of registers; an allocator that implements CallRunner with
// run_calls_on (below) makes the same calls, in the same order, inlined into one loop.
//
// The calls are read in place from the caller's records (`CallView`: a stride and the offsets of
// four fields), as the allocators do not know the harness's event type. Live pointers are kept
// by slot, a small number each live buffer has (the harness's Op::slot): an allocate stores its
// pointer at slot_ptr[slot], a deallocate frees slot_ptr[slot] (nothing when 0) and clears it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "allocators/allocator.h"

namespace gmb {

struct CallView {
  const unsigned char* base = nullptr;  // the first call's record
  std::size_t stride = 0;               // bytes from one record to the next
  // Offsets in a record: kind (std::uint8_t: kAllocate or kDeallocate), bytes (Bytes), stream
  // (StreamId), slot (std::uint32_t).
  std::size_t kind_at = 0, bytes_at = 0, stream_at = 0, slot_at = 0;
  static constexpr std::uint8_t kAllocate = 0, kDeallocate = 1;

  template <class T>
  static T field(const unsigned char* record, std::size_t at) {
    T v;
    std::memcpy(&v, record + at, sizeof v);
    return v;
  }
};

struct CallResult {
  DevPtr ptr = 0;     // allocate: the pointer; deallocate: the pointer freed (0: none)
  MemoryInUse after;  // the allocator's bytes in use after the call
};

class CallRunner {
 public:
  virtual ~CallRunner() = default;
  // Makes calls [0, n) in order, results[i] for call i, and stops early after the first call
  // whose bytes in use pass `mark` (reserved above mark.reserved_bytes, or equal to it with
  // allocated above mark.allocated_bytes: where the caller must look at the allocator before the
  // next call), or at an allocate that fails (slot_ptr unchanged, `failed` set). Returns the
  // number of calls made (the failed one not counted).
  virtual std::size_t run_calls(const CallView& calls, std::size_t n, DevPtr* slot_ptr, CallResult* results,
                                MemoryInUse mark, bool& failed) = 0;
};

inline CallRunner* call_runner(Allocator& a) { return dynamic_cast<CallRunner*>(&a); }

// run_calls for an allocator type A whose allocate, deallocate and in_use the compiler can call
// directly (a final class).
template <class A>
std::size_t run_calls_on(A& a, const CallView& calls, std::size_t n, DevPtr* slot_ptr, CallResult* results,
                         MemoryInUse mark, bool& failed) {
  failed = false;
  const unsigned char* rec = calls.base;
  for (std::size_t i = 0; i < n; ++i, rec += calls.stride) {
    const auto slot = CallView::field<std::uint32_t>(rec, calls.slot_at);
    CallResult& r = results[i];
    if (CallView::field<std::uint8_t>(rec, calls.kind_at) == CallView::kAllocate) {
      const std::optional<DevPtr> ptr =
          a.A::allocate(CallView::field<Bytes>(rec, calls.bytes_at), CallView::field<StreamId>(rec, calls.stream_at));
      if (!ptr) {
        failed = true;
        return i;
      }
      r.ptr = slot_ptr[slot] = *ptr;
    } else {
      r.ptr = slot_ptr[slot];
      slot_ptr[slot] = 0;
      if (r.ptr) a.A::deallocate(r.ptr);
    }
    r.after = a.A::in_use();
    if (r.after.reserved_bytes > mark.reserved_bytes ||
        (r.after.reserved_bytes == mark.reserved_bytes && r.after.allocated_bytes > mark.allocated_bytes))
      return i + 1;
  }
  return n;
}

}  // namespace gmb
