// The events the logging adaptors report (logging_allocator.h, logging_device.h), format-neutral:
// the RMM log export (harness/export/rmm_log_writer.h) and the PyTorch snapshot export read the
// same stream as it happens, so a replay is never held whole.
#pragma once

#include <cstdint>

#include "common/types.h"

namespace gmb {

struct AllocatorEvent {
  enum class Kind : std::uint8_t {
    Alloc,         // a block handed out: ptr, bytes (as requested), stream
    Free,          // a block given back: ptr, bytes and stream of its allocation
    AllocFailed,   // an allocation that failed (OOM): bytes, stream; ptr 0
    SegmentAlloc,  // device memory taken: cudaMalloc / cudaMallocManaged / pool growth (ptr, bytes)
    SegmentFree,   // device memory given back (ptr, bytes)
    SegmentMap,    // expandable segments: physical pages mapped at ptr (bytes)
    SegmentUnmap,  // ... and unmapped
  };
  Kind kind = Kind::Alloc;
  DevPtr ptr = 0;
  Bytes bytes = 0;
  StreamId stream = 0;
};

class AllocatorEventSink {
 public:
  virtual ~AllocatorEventSink() = default;
  virtual void on_event(const AllocatorEvent& event) = 0;
};

// Passes events on until closed (a run's own clean-up after the workload is not reported).
class AllocatorEventGate final : public AllocatorEventSink {
 public:
  explicit AllocatorEventGate(AllocatorEventSink& to) : to_(&to) {}
  void on_event(const AllocatorEvent& event) override {
    if (to_) to_->on_event(event);
  }
  void close() { to_ = nullptr; }

 private:
  AllocatorEventSink* to_;
};

}  // namespace gmb
