// `gpumembench reduce`: shrinks a trace to a small one that still ends in the same kind of OOM
// (fragmentation or capacity) under the same allocator, settings and capacity; optionally one that
// also runs without an OOM under other settings (the contrast). The interface of harness/reduce/.
//
// Steps: replay the trace to its first OOM and drop every event after it; delta debugging (ddmin)
// over allocation lifetimes, an allocation and its free removed together (first those that were
// freed and never grew the reserved memory, then all); neighbouring never-freed allocations
// merged into one; coarser sizes (each size but the failed request's, rounded down or up to the
// coarsest power-of-two multiple that keeps the OOM); ids renumbered in allocation order. A
// fragmentation OOM must also keep at least the input's room: live requested bytes before the
// request no more than the input's (else larger sizes could make it an OOM at the brink of the
// capacity, another story). Only candidates that keep the OOM at the request are accepted, so
// whatever the budget allows, the result is a valid reproducer. Deterministic: no randomness,
// the same replays in the same order, unless the time limit stops it (the replay limit is the
// deterministic bound).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/reduce/lifetime_trace.h"

namespace gmb {

struct ReduceProgress {
  std::string phase;             // "ddmin (freed lifetimes)", "ddmin", "coarsen"
  std::uint64_t events = 0;      // events of the best trace so far
  std::uint64_t input_events = 0;
  std::uint64_t replays = 0;
  double seconds = 0;
};

struct ReduceSettings {
  ReplaySetup target;                          // the trace must OOM at its request here...
  std::optional<AllocatorOptions> contrast;    // ...and run without an OOM under these options
  double max_seconds = 60;                     // 0: no limit
  std::uint64_t max_replays = 0;               // 0: no limit
  bool coarsen = true;
  std::function<void(const ReduceProgress&)> progress;  // called often; rate-limit on the caller's side
};

struct ReduceResult {
  std::uint64_t input_events = 0;  // Alloc/Free events of the input
  std::uint64_t oom_event = 0;     // the first OOM's event in the input
  OomKind kind = OomKind::Capacity;
  Bytes request_bytes = 0;         // the failed request (input)
  std::vector<Op> ops;             // the reduced trace; its last op is the failed request
  std::uint64_t replays = 0, events_replayed = 0;
  double seconds = 0;
  std::string stopped_by;          // "": ran to the end (1-minimal in lifetimes); else "time limit", "replay limit"
};

struct ReduceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The trace runs without an OOM under the target: nothing to reduce.
struct NoOomError : ReduceError {
  using ReduceError::ReduceError;
};

// Throws ReduceError when the trace has no OOM under the target, or (with a contrast) the input
// cut at its OOM also OOMs under the contrast: nothing to reduce towards.
ReduceResult reduce_oom(const std::vector<Op>& input, const ReduceSettings& settings);

}  // namespace gmb
