// CallRunner: many allocate/deallocate calls in one virtual call, for a harness that replays
// millions of events (harness/run/runner.cpp). Three virtual calls an event (allocate or
// deallocate, then in_use) keep the caller's bookkeeping in memory instead of registers, and the
// allocator must find each freed pointer's block again; run_calls makes the same calls, in the
// same order, in one loop, and may keep the live blocks by slot (caching does).
//
// The calls are read in place from the caller's records (`CallView`: a stride and the offsets of
// four fields), as the allocators do not know the harness's event type. Live pointers are kept
// by slot, a small number each live buffer has (the harness's Op::slot): an allocate stores its
// pointer at slot_ptr[slot], a deallocate frees slot_ptr[slot] (nothing when 0) and clears it.
// An allocator that implements CallRunner still takes deallocate(ptr) for any live pointer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "allocators/allocator.h"

namespace gmb {

struct CallView {
  const unsigned char* base = nullptr;  // the first call's record
  std::size_t stride = 0;               // bytes from one record to the next
  // Offsets in a record: kind (std::uint8_t: kAllocate, kDeallocate, kFreeRequested, or above:
  // not a call), bytes (Bytes), stream (StreamId), slot (std::uint32_t).
  std::size_t kind_at = 0, bytes_at = 0, stream_at = 0, slot_at = 0;
  // kFreeRequested: Allocator::free_requested(slot_ptr[slot]); the slot keeps its pointer.
  static constexpr std::uint8_t kAllocate = 0, kDeallocate = 1, kFreeRequested = 2;

  template <class T>
  static T field(const unsigned char* record, std::size_t at) {
    T v;
    std::memcpy(&v, record + at, sizeof v);
    return v;
  }
};

struct CallResult {
  DevPtr ptr = 0;     // allocate: the pointer; deallocate, free_requested: the pointer freed (0: none)
  MemoryInUse after;  // the allocator's bytes in use after the call
};

// What a run of calls leaves for a caller that wants no call's own result (run_calls_highs):
// the most bytes in use after any call, allocated and reserved each on its own, and the bytes
// after the last call made.
struct CallHighs {
  MemoryInUse high;  // raised by every call made, never lowered (the caller starts it)
  MemoryInUse last;  // after the last call made (unchanged when none was)
};

class CallRunner {
 public:
  virtual ~CallRunner() = default;
  // Makes calls [0, n) in order, results[i] for call i, and stops early after the first call
  // whose bytes in use pass `mark` (reserved above mark.reserved_bytes, or equal to it with
  // allocated above mark.allocated_bytes: where the caller must look at the allocator before the
  // next call), at an allocate that fails (slot_ptr unchanged, `failed` set), or at a record
  // whose kind is neither (not a call: the harness's compute ops). Returns the number of calls
  // made (the failed one not counted).
  virtual std::size_t run_calls(const CallView& calls, std::size_t n, DevPtr* slot_ptr, CallResult* results,
                                MemoryInUse mark, bool& failed) = 0;
  // The same calls, stops and return value as run_calls, without a result per call: `highs`
  // takes what the results would have said (a replay's step peaks need no more, and writing
  // and reading 24 bytes a call back costs it more than the maxima).
  virtual std::size_t run_calls_highs(const CallView& calls, std::size_t n, DevPtr* slot_ptr, MemoryInUse mark,
                                      CallHighs& highs, bool& failed) = 0;
};

inline CallRunner* call_runner(Allocator& a) { return dynamic_cast<CallRunner*>(&a); }

}  // namespace gmb
