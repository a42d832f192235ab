// The value of --metrics (a run, and merge): the fragmentation-metric families the tables show,
// comma-separated ("gmlake,tf"), or "all". One parser, so both commands say the same thing.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/cli/usage_error.h"
#include "harness/run/fragmentation_metrics.h"

namespace gmb {

// Throws UsageError naming the bad family and the valid ones.
inline std::vector<std::string> parse_metrics_flag(const std::string& flag) {
  std::vector<std::string> out;
  bool all = false;
  std::size_t start = 0;
  // Every name is checked, those after "all" too: "all,bogus" is a typo, not "all".
  while (start <= flag.size()) {
    const std::size_t comma = std::min(flag.find(',', start), flag.size());
    const std::string name = flag.substr(start, comma - start);
    start = comma + 1;
    if (name == "all") {
      all = true;
      continue;
    }
    if (std::find(metric_families().begin(), metric_families().end(), name) == metric_families().end())
      throw UsageError(fmt::format("--metrics: '{}' is not a metric family (valid: {}, all)", name,
                                   fmt::join(metric_families(), ", ")));
    out.push_back(name);
  }
  return all ? metric_families() : out;
}

}  // namespace gmb
