// What the tables show for one case over its repeats: the median of each metric with its
// min-max spread, and the run that stands for the case (for counts and the OOM record).
#pragma once

#include <cstddef>

#include "harness/results.h"

namespace gmb {

struct CaseSummary {
  // The median run by peak reserved bytes (the earliest such run on ties, so with identical
  // runs it is the first, whose timeline and OOM files the reports hold); null without runs.
  const RunMetrics* run = nullptr;
  std::size_t runs = 0;
  Spread peak_reserved, peak_allocated, fragmentation, steps_per_s, tokens_per_s;
  // Ran every repeat without an OOM or an error: only such cases compete for "best" in a column
  // (a case stopped by an OOM reserves less because it did less).
  bool clean = false;
};

CaseSummary summarize(const CaseResult& c);

}  // namespace gmb
