// The workload's own need (WorkloadNeed, results.h): the live requested bytes over its events,
// apart from any allocator, step by step through the Workload interface only (so a streamed
// trace streams here too). On sim the runner feeds the run's own steps to a NeedTracker (the
// workload is then read once, not twice); compute_workload_need is the separate pass.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "harness/run/results.h"
#include "workloads/workload.h"

namespace gmb {

// PyTorch's rounding of a request (CUDACachingAllocator's round_size at default settings): a
// multiple of 512 bytes, at least 512. Blocks are not rounded further (segments are, but what
// a segment holds beyond its blocks is the allocator's choice, not the workload's need).
Bytes torch_rounded_size(Bytes requested);

// The need accumulated step by step: add_step() with the ops of steps 0, 1, ... in order (the
// end step of a workload of unknown length is not a step), their slots given by one BufferSlots
// (buffer_slots.h) or the workload, every slot so far below slots_end, then finish() once.
// A step given in pieces (StepInfo::more) is added piece by piece: add_piece, step_ends on its
// last. Frees of ids that are not live (slot 0) are ignored.
class NeedTracker {
 public:
  void add_step(const std::vector<Op>& ops, std::uint32_t slots_end) { add_piece(ops, slots_end, true); }
  void add_piece(const std::vector<Op>& ops, std::uint32_t slots_end, bool step_ends);
  WorkloadNeed finish();

 private:
  // Sums of live bytes are kept in 128 bits (a trace may ask for 2^64 - 1 bytes, then more) and
  // reported saturated at 2^64 - 1: more than any card, never wrapped to a small number.
  using Wide = unsigned __int128;
  static Bytes saturated(Wide v) { return v > UINT64_MAX ? UINT64_MAX : static_cast<Bytes>(v); }

  WorkloadNeed need_;
  // By slot: the live buffer there, its requested bytes and their rounding (at least 512 bytes;
  // both 0: no buffer there; slot 0 never has one, so a free of an id that is not live takes 0).
  struct Live {
    Bytes bytes = 0;
    Bytes rounded = 0;
  };
  std::vector<Live> live_;
  [[gnu::noinline]] void grow_live(std::uint32_t slot);  // live_ covers slot
  // add_step's ops while the sums fit in 64 bits (the peaks in locals: stores into live_ could
  // alias need_'s fields); returns the first op not taken, the one whose rounded sum would pass
  // 2^64 - 1, or end.
  struct Sums64 {
    std::uint64_t requested, rounded, step_peak, event;
  };
  [[gnu::noinline]] const Op* add_ops_64(const Op* op, const Op* end, std::uint64_t step, Sums64& sums);
  Wide requested_ = 0, rounded_ = 0;
  std::uint64_t event_ = 0, step_ = 0;
  bool in_step_ = false;      // step_ has had pieces, not its last
  Bytes step_peak_ = 0;       // over step_'s pieces so far
};

// Walks steps 0 .. min(max_steps, num_steps()) - 1 (max_steps 0: all) of a workload that has
// not run yet.
WorkloadNeed compute_workload_need(Workload& workload, std::uint64_t max_steps);

}  // namespace gmb
