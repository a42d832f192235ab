#include "harness/run/workload_need.h"

#include <algorithm>

#include "allocators/caching/alloc_conf.h"

namespace gmb {

Bytes torch_rounded_size(Bytes requested) { return caching::round_to_min_block(requested); }

void NeedTracker::add_step(const std::vector<Op>& ops) {
  const std::uint64_t step = step_++;
  Bytes step_peak = saturated(requested_);  // what is live when the step starts counts for it
  for (const Op& op : ops) {
    if (op.kind == Op::Kind::Compute) continue;
    if (op.kind == Op::Kind::Alloc) {
      if (auto old = live_.exchange(op.id, op.bytes)) {  // an id allocated again replaces its buffer
        requested_ -= *old;
        rounded_ -= torch_rounded_size(*old);
      }
      requested_ += op.bytes;
      rounded_ += torch_rounded_size(op.bytes);
      if (saturated(requested_) > need_.peak_requested_bytes) {
        need_.peak_requested_bytes = saturated(requested_);
        need_.peak_requested_step = step;
        need_.peak_requested_event = event_;
      }
      if (saturated(rounded_) > need_.peak_rounded_bytes) {
        need_.peak_rounded_bytes = saturated(rounded_);
        need_.peak_rounded_step = step;
        need_.peak_rounded_event = event_;
      }
      step_peak = std::max(step_peak, saturated(requested_));
    } else if (auto bytes = live_.take(op.id)) {
      requested_ -= *bytes;
      rounded_ -= torch_rounded_size(*bytes);
    }
    ++event_;
  }
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
  // Workload::kUnknownSteps (a trace stream): until the workload's end step.
  const std::uint64_t steps = max_steps ? std::min(max_steps, workload.num_steps()) : workload.num_steps();
  std::vector<Op> ops;
  for (std::uint64_t step = 0; step < steps; ++step) {
    ops.clear();
    StepInfo info;
    workload.step_ops(step, ops, info);
    if (info.end) break;
    tracker.add_step(ops);
  }
  workload.finish();
  return tracker.finish();
}

}  // namespace gmb
