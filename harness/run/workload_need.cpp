#include "harness/run/workload_need.h"

#include <algorithm>
#include <vector>

#include "allocators/caching/alloc_conf.h"
#include "harness/run/buffer_table.h"

namespace gmb {

Bytes torch_rounded_size(Bytes requested) { return caching::round_to_min_block(requested); }

namespace {
// Sums of live bytes are kept in 128 bits (a trace may ask for 2^64 - 1 bytes, then more) and
// reported saturated at 2^64 - 1: more than any card, never wrapped to a small number.
using Wide = unsigned __int128;
Bytes saturated(Wide v) { return v > UINT64_MAX ? UINT64_MAX : static_cast<Bytes>(v); }
}  // namespace

WorkloadNeed compute_workload_need(Workload& workload, std::uint64_t max_steps) {
  WorkloadNeed need;
  // Workload::kUnknownSteps (a trace stream): until the workload's end step.
  const std::uint64_t steps = max_steps ? std::min(max_steps, workload.num_steps()) : workload.num_steps();
  if (steps != Workload::kUnknownSteps) need.step_peak_requested_bytes.reserve(steps);
  BufferTable live;  // id -> requested bytes
  Wide requested = 0, rounded = 0;
  std::uint64_t event = 0;
  std::vector<Op> ops;
  for (std::uint64_t step = 0; step < steps; ++step) {
    ops.clear();
    StepInfo info;
    workload.step_ops(step, ops, info);
    if (info.end) break;
    Bytes step_peak = saturated(requested);  // what is live when the step starts counts for it
    for (const Op& op : ops) {
      if (op.kind == Op::Kind::Compute) continue;
      if (op.kind == Op::Kind::Alloc) {
        if (auto old = live.take(op.id)) {  // an id allocated again replaces its buffer
          requested -= *old;
          rounded -= torch_rounded_size(*old);
        }
        live.put(op.id, op.bytes);
        requested += op.bytes;
        rounded += torch_rounded_size(op.bytes);
        if (saturated(requested) > need.peak_requested_bytes) {
          need.peak_requested_bytes = saturated(requested);
          need.peak_requested_step = step;
          need.peak_requested_event = event;
        }
        if (saturated(rounded) > need.peak_rounded_bytes) {
          need.peak_rounded_bytes = saturated(rounded);
          need.peak_rounded_step = step;
          need.peak_rounded_event = event;
        }
        step_peak = std::max(step_peak, saturated(requested));
      } else if (auto bytes = live.take(op.id)) {
        requested -= *bytes;
        rounded -= torch_rounded_size(*bytes);
      }
      ++event;
    }
    need.step_peak_requested_bytes.push_back(step_peak);
  }
  workload.finish();
  need.steps = need.step_peak_requested_bytes.size();
  need.events = event;
  need.requested_from_step_bytes.resize(need.steps);
  Bytes from = 0;
  for (std::uint64_t s = need.steps; s-- > 0;) {
    from = std::max(from, need.step_peak_requested_bytes[s]);
    need.requested_from_step_bytes[s] = from;
  }
  return need;
}

}  // namespace gmb
