#include "harness/run/workload_need.h"

#include <algorithm>
#include <cassert>

#include "allocators/caching/alloc_conf.h"
#include "harness/run/buffer_slots.h"

namespace gmb {

Bytes torch_rounded_size(Bytes requested) { return caching::round_to_min_block(requested); }

namespace {

// torch_rounded_size in six instructions, not seventeen (this runs for every event of a trace),
// with one branch that only requests within kMin of 2^64 take (torch saturates those at 2^64 - 1,
// round_to_min_block; the add below would wrap). A free's bytes (mostly 0) are masked off by the
// caller: a branch on "below the minimum" would follow the ops' kinds, a select does not.
Bytes rounded_without_branch(Bytes requested) {
  constexpr Bytes kMin = caching::kMinBlockSize;
  static_assert((kMin & (kMin - 1)) == 0, "rounding by a mask");
  Bytes r = std::max((requested + kMin - 1) & ~(kMin - 1), kMin);
  if (__builtin_expect(requested > UINT64_MAX - kMin, 0)) r = UINT64_MAX;
  assert(r == torch_rounded_size(requested));
  return r;
}

}  // namespace

void NeedTracker::add_piece(const std::vector<Op>& ops, std::uint32_t slots_end, bool step_ends) {
  const std::uint64_t step = step_;
  // live_ covers every slot of the step: the loops below need no test per op.
  // (Slot 0 at least: a free of an id that is not live reads it.)
  const std::uint32_t slots = std::max<std::uint32_t>(slots_end, 1);
  if (slots > live_.size()) grow_live(slots - 1);
  // The sums and the event count in locals for the loops (the vectors' growth is a call).
  Wide requested = requested_, rounded = rounded_;
  std::uint64_t event = event_;
  // What is live when the step starts counts for it.
  Bytes step_peak = in_step_ ? step_peak_ : saturated(requested);
  const Op* op = ops.data();
  const Op* const end = op + ops.size();
  // While the sums fit in 64 bits (always, but for traces that ask for exabytes): 64-bit sums,
  // the peaks in locals (stores into live_ could alias need_'s fields). The rounded sum is never
  // below the requested one (a buffer's rounding is not below its bytes), so it alone is checked
  // for overflow; at an op that would overflow it the loop below takes over, from that op.
  if (rounded <= UINT64_MAX) {
    Sums64 sums{static_cast<std::uint64_t>(requested), static_cast<std::uint64_t>(rounded), step_peak, event};
    op = add_ops_64(op, end, step, sums);
    requested = sums.requested;
    rounded = sums.rounded;
    step_peak = sums.step_peak;
    event = sums.event;
  }
  for (; op != end; ++op) {
    if (!is_buffer_call(op->kind)) continue;
    if (op->kind == Op::Kind::FreeRequested) {  // its memory is needed until its free
      ++event;
      continue;
    }
    assert(op->slot < live_.size());
    Live& l = live_[op->slot];
    if (op->kind == Op::Kind::Alloc) {
      requested -= l.bytes;  // an id allocated again replaces its buffer (0 where none is live)
      rounded -= l.rounded;
      l.bytes = op->bytes;
      l.rounded = torch_rounded_size(op->bytes);
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
    } else {
      requested -= l.bytes;
      rounded -= l.rounded;
      l.bytes = 0;
      l.rounded = 0;
    }
    ++event;
  }
  requested_ = requested;
  rounded_ = rounded;
  event_ = event;
  in_step_ = !step_ends;
  step_peak_ = step_peak;
  if (step_ends) {
    need_.step_peak_requested_bytes.push_back(step_peak);
    ++step_;
  }
}

// The loop of add_step while the sums fit in 64 bits, in a function of its own: fewer values
// live across it than in add_step, so they stay in registers.
const Op* NeedTracker::add_ops_64(const Op* op, const Op* const end, const std::uint64_t step, Sums64& sums) {
  std::uint64_t req = sums.requested, rnd = sums.rounded, step_peak = sums.step_peak, event = sums.event;
  Bytes peak_req = need_.peak_requested_bytes, peak_rnd = need_.peak_rounded_bytes;
  Live* const live = live_.data();
  for (; op != end; ++op) {
    if (!is_buffer_call(op->kind)) continue;
    if (__builtin_expect(op->kind == Op::Kind::FreeRequested, 0)) {  // its memory is needed until its free
      ++event;
      continue;
    }
    assert(op->slot < live_.size());  // add_step grew live_ for the step
    Live& l = live[op->slot];
    // An alloc and a free without a branch between them (allocs and frees come in turn, so a
    // branch on the kind is mispredicted at every other op): the slot's buffer is replaced by
    // the alloc's, or by nothing. An id allocated again replaces its buffer; a free of an id
    // that is not live (slot 0, or freed) finds l zero. Where a free makes the sums smaller,
    // the peak tests below cannot pass (the peaks are at least the sums before it).
    const Bytes alloc = op->kind == Op::Kind::Alloc ? ~Bytes{0} : 0;
    const Bytes bytes = op->bytes & alloc, r = rounded_without_branch(op->bytes) & alloc;
    std::uint64_t new_rnd;
    if (__builtin_add_overflow(rnd - l.rounded, r, &new_rnd)) break;  // to add_step's 128-bit loop
    req = req - l.bytes + bytes;
    rnd = new_rnd;
    l.bytes = bytes;
    l.rounded = r;
    if (__builtin_expect(req > peak_req, 0)) {
      peak_req = req;
      need_.peak_requested_step = step;
      need_.peak_requested_event = event;
    }
    if (__builtin_expect(rnd > peak_rnd, 0)) {
      peak_rnd = rnd;
      need_.peak_rounded_step = step;
      need_.peak_rounded_event = event;
    }
    step_peak = std::max(step_peak, req);
    ++event;
  }
  need_.peak_requested_bytes = peak_req;
  need_.peak_rounded_bytes = peak_rnd;
  sums = {req, rnd, step_peak, event};
  return op;
}

void NeedTracker::grow_live(std::uint32_t slot) {
  live_.resize(std::max<std::size_t>(std::size_t(slot) + 1, 2 * live_.size()), Live{});
}

WorkloadNeed NeedTracker::finish() {
  if (in_step_) {  // a step whose last piece never came (the run stopped in it) counts as far as it went
    need_.step_peak_requested_bytes.push_back(step_peak_);
    ++step_;
    in_step_ = false;
  }
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
    whole_step_ops(workload, step, ops, info);
    if (info.end) break;
    std::uint32_t slots_end = workload.slots_end();
    if (!workload.gives_slots()) {
      slots.assign(ops);
      slots_end = slots.end();
    }
    tracker.add_step(ops, slots_end);
  }
  workload.finish();
  return tracker.finish();
}

}  // namespace gmb
