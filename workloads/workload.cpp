#include "workloads/workload.h"

namespace gmb {

void whole_step_ops(Workload& workload, std::uint64_t step, std::vector<Op>& out, StepInfo& info) {
  info = StepInfo{};
  const std::size_t start = out.size();
  for (;;) {
    StepInfo piece;
    workload.step_ops(step, out, piece);
    info.real_tokens += piece.real_tokens;
    info.padded_tokens += piece.padded_tokens;
    if (!piece.more) {
      // A step's first piece says it is the end; a later one cannot (the step has ops).
      info.end = piece.end && out.size() == start;
      return;
    }
  }
}

}  // namespace gmb
