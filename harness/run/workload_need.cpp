#include "harness/run/workload_need.h"

#include <algorithm>

#include "allocators/caching/alloc_conf.h"
#include "harness/run/buffer_slots.h"

namespace gmb {

Bytes torch_rounded_size(Bytes requested) { return caching::round_to_min_block(requested); }

void NeedTracker::add_step(const std::vector<Op>& ops) {
  const std::uint64_t step = step_++;
  Bytes step_peak = saturated(requested_);  // what is live when the step starts counts for it
  for (const Op& op : ops) {
    if (op.kind == Op::Kind::Compute) continue;
    const std::uint32_t s = op.slot;
    if (s >= live_.size()) {
      live_.resize(std::max<std::size_t>(std::size_t(s) + 1, 2 * live_.size()), 0);
      bytes_.resize(live_.size(), 0);
    }
    if (op.kind == Op::Kind::Alloc) {
      if (live_[s]) {  // an id allocated again replaces its buffer
        requested_ -= bytes_[s];
        rounded_ -= torch_rounded_size(bytes_[s]);
      }
      live_[s] = 1;
      bytes_[s] = op.bytes;
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
    } else if (live_[s]) {  // slot 0 never is
      live_[s] = 0;
      requested_ -= bytes_[s];
      rounded_ -= torch_rounded_size(bytes_[s]);
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
