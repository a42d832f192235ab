#include "harness/report/case_summary.h"

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

const RunMetrics* representative(const CaseResult& c) { return summarize(c).run; }

double alloc_share(const CaseResult& c, const RunMetrics& m) {
  if (m.seconds <= 0) return 0;
  return c.throughput_modeled ? m.modeled_call_seconds / m.seconds : m.alloc_seconds / m.seconds;
}

std::optional<double> harness_share(const CaseResult& c, const RunMetrics& m) {
  if (c.throughput_modeled || m.seconds <= 0) return std::nullopt;
  return m.harness_seconds / m.seconds;
}

}  // namespace gmb
