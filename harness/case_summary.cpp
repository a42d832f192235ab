#include "harness/case_summary.h"

#include <algorithm>

namespace gmb {

CaseSummary summarize(const CaseResult& c) {
  CaseSummary s;
  s.runs = c.runs.size();
  if (c.runs.empty()) return s;
  s.peak_reserved = spread_of(c.runs, [](const RunMetrics& m) { return m.peak_reserved_bytes; });
  s.peak_allocated = spread_of(c.runs, [](const RunMetrics& m) { return m.peak_allocated_bytes; });
  s.fragmentation = spread_of(c.runs, [](const RunMetrics& m) { return m.fragmentation; });
  s.steps_per_s = spread_of(c.runs, [](const RunMetrics& m) { return m.steps_per_s; });
  s.tokens_per_s = spread_of(c.runs, [](const RunMetrics& m) { return m.tokens_per_s; });
  // The lower median of peak reserved: an actual run's value, also for an even count.
  std::vector<Bytes> peaks;
  for (const auto& m : c.runs) peaks.push_back(m.peak_reserved_bytes);
  std::sort(peaks.begin(), peaks.end());
  const Bytes median = peaks[(peaks.size() - 1) / 2];
  for (const auto& m : c.runs)
    if (m.peak_reserved_bytes == median) {
      s.run = &m;
      break;
    }
  s.clean = c.error.empty() && std::all_of(c.runs.begin(), c.runs.end(), [](const RunMetrics& m) { return m.ooms == 0; });
  return s;
}

}  // namespace gmb
