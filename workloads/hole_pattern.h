// The source documents' hole pattern: allocate 100, 200, 300 MiB; free the 200; request
// 250 MiB. Sizes, which to free, the probe and the repeat count are parameters.
#pragma once

#include <memory>
#include <vector>

#include "workloads/workload.h"

namespace gmb {

struct HolePatternParams {
  std::vector<Bytes> sizes{100 * MiB, 200 * MiB, 300 * MiB};
  std::vector<std::size_t> free_indices{1};  // indices into sizes
  std::vector<Bytes> probes{250 * MiB};      // requested after the frees
  std::uint64_t repeat = 1;                  // steps; each step frees everything at its end
};

std::unique_ptr<Workload> make_hole_pattern(const HolePatternParams& params);

}  // namespace gmb
