#include "harness/run/workload_need.h"

#include <algorithm>

#include "allocators/caching/alloc_conf.h"
#include "harness/run/buffer_slots.h"

namespace gmb {

Bytes torch_rounded_size(Bytes requested) { return caching::round_to_min_block(requested); }

void NeedTracker::add_step(const std::vector<Op>& ops) {
  const std::uint64_t step = step_++;
  // The sums and the event count in locals for the loop (the vectors' growth is a call).
  Wide requested = requested_, rounded = rounded_;
  std::uint64_t event = event_;
  Bytes step_peak = saturated(requested);  // what is live when the step starts counts for it
  for (const Op& op : ops) {
    if (op.kind == Op::Kind::Compute) continue;
    const std::uint32_t s = op.slot;
    if (s >= live_.size()) live_.resize(std::max<std::size_t>(std::size_t(s) + 1, 2 * live_.size()), Live{});
    Live& l = live_[s];
    if (op.kind == Op::Kind::Alloc) {
      if (l.rounded) {  // an id allocated again replaces its buffer
        requested -= l.bytes;
        rounded -= l.rounded;
      }
      l.bytes = op.bytes;
      l.rounded = torch_rounded_size(op.bytes);
      requested += l.bytes;
      rounded += l.rounded;
      const Bytes req = saturated(requested);
      if (req > need_.peak_requested_bytes) {
        need_.peak_requested_bytes = req;
        need_.peak_requested_step = step;
        need_.peak_requested_event = event;
      }
      if (saturated(rounded) > need_.peak_rounded_bytes) {
        need_.peak_rounded_bytes = saturated(rounded);
        need_.peak_rounded_step = step;
        need_.peak_rounded_event = event;
      }
      step_peak = std::max(step_peak, req);
    } else if (l.rounded) {  // slot 0 never is live
      requested -= l.bytes;
      rounded -= l.rounded;
      l.rounded = 0;
    }
    ++event;
  }
  requested_ = requested;
  rounded_ = rounded;
  event_ = event;
  need_.step_peak_requested_bytes.push_back(step_peak);
}

WorkloadNeed NeedTracker::finish() {
  WorkloadNeed need = std::move(need_);
  need.steps = need.step_peak_requested_bytes.size();
  need.events = event_;
  need.requested_from_step_bytes.resize(need.steps);
  Bytes from = 0;
  for (std::uint64_t s = need.steps; s-- > 0;) {
    from = std::max(from, need.step_peak_requested_bytes[s]);
    need.requested_from_step_bytes[s] = from;
  }
  return need;
}

WorkloadNeed compute_workload_need(Workload& workload, std::uint64_t max_steps) {
  NeedTracker tracker;
  BufferSlots slots;
  // Workload::kUnknownSteps (a trace stream): until the workload's end step.
  const std::uint64_t steps = max_steps ? std::min(max_steps, workload.num_steps()) : workload.num_steps();
  std::vector<Op> ops;
  for (std::uint64_t step = 0; step < steps; ++step) {
    ops.clear();
    StepInfo info;
    workload.step_ops(step, ops, info);
    if (info.end) break;
    if (!workload.gives_slots()) slots.assign(ops);
    tracker.add_step(ops);
  }
  workload.finish();
  return tracker.finish();
}

}  // namespace gmb
