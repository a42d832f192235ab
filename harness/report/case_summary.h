// What the tables show for one case over its repeats: the median of each metric with its
// min-max spread, and the run that stands for the case (for counts and the OOM record).
#pragma once

#include <cstddef>
#include <optional>

#include "harness/run/results.h"

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

// Metrics of a case: the run with the median peak reserved stands for the case (its reserved,
// allocated and fragmentation belong together); rates are medians over the runs. Null without runs.
const RunMetrics* representative(const CaseResult& c);

// Share of the run's time spent inside allocator calls: measured on the GPU; on sim, the
// modeled driver-call time over the modeled run time (the allocator's own CPU time is not
// part of the sim's model).
double alloc_share(const CaseResult& c, const RunMetrics& m);
// Host time of the harness itself over the run's time: an upper bound on what the harness adds
// to a step (its work may overlap GPU kernels). Only where the time is measured: on sim the
// run's time is modeled and the harness's host time says nothing about it.
std::optional<double> harness_share(const CaseResult& c, const RunMetrics& m);

}  // namespace gmb
