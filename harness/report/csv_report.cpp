// results.csv: one row per case, raw figures, for scripts.
#include "harness/report/csv_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "harness/report/case_summary.h"
#include "harness/report/oom_diagnosis.h"

namespace gmb {

namespace {

// A rate in the CSV: the raw figure, always in the same notation (six decimals at most, no
// exponent, no trailing zeros), whether the case had an OOM or not (the oom_* columns say so).
std::string csv_rate(double v) {
  std::string s = fmt::format("{:.6f}", v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}


// The first OOM's details for the CSV.
std::string oom_csv_cells(const CaseResult& c, const RunMetrics& m) {
  auto v = [&](auto f) { return m.first_oom ? std::to_string(f(*m.first_oom)) : std::string(); };
  return fmt::format("{},{},{},{},{},{},{},{},{},{}", v([](auto& o) { return o.allocated_bytes; }),
                     v([](auto& o) { return o.reserved_bytes; }), v([](auto& o) { return o.cached_bytes; }),
                     v([](auto& o) { return o.largest_free_block; }), v([](auto& o) { return o.capacity_bytes; }),
                     v([](auto& o) { return o.retried_after_freeing_cache ? 1 : 0; }), m.fragmentation_ooms,
                     m.capacity_ooms, c.capacity_requested_bytes, c.ballast_bytes);
}


}  // namespace

std::string csv_table(const RunReport& r) {
  std::string out =
      "label,workload,allocator,device_kind,device_name,capacity_bytes,peak_reserved_bytes,peak_allocated_bytes,"
      "fragmentation,device_mallocs,device_frees,allocs,cache_hits,hit_rate,steps_per_s,steps_per_s_min,"
      "steps_per_s_max,tokens_per_s,repeats,throughput_modeled,memory_modeled,oom_kind,oom_step,oom_event,"
      "oom_requested_bytes,ooms,padded_tokens_per_s,alloc_time_share,harness_overhead_share,"
      "peak_reserved_bytes_min,peak_reserved_bytes_max,fragmentation_min,fragmentation_max,tokens_per_s_min,"
      "tokens_per_s_max,error,"
      "oom_allocated_bytes,oom_reserved_bytes,oom_cached_bytes,oom_largest_free_block_bytes,oom_capacity_bytes,"
      "oom_retried,fragmentation_ooms,capacity_ooms,capacity_requested_bytes,ballast_bytes,"
      "need_peak_requested_bytes,need_peak_rounded_bytes,need_peak_step,need_peak_event,"
      "allocated_at_peak_reserved_bytes,fragmentation_at_first_oom,oom_need_from_here_bytes,oom_what_would_fix_it,"
      "oom_message\n";
  const auto columns = static_cast<std::size_t>(std::count(out.begin(), out.end(), ',')) + 1;
  auto q = [](const std::string& s) {
    std::string e = "\"";
    for (char ch : s) e += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return e + "\"";
  };
  constexpr std::size_t kAfterError = 19;  // the columns after `error`
  for (const auto& c : r.cases) {
    const RunMetrics* m = representative(c);
    const std::size_t index = static_cast<std::size_t>(&c - r.cases.data());
    if (!m) {
      // A case that could not run still has its row: what it was, and the error.
      const std::size_t before_error = columns - kAfterError - 1;
      out += fmt::format("{},{},{},{},{},{}{}{}{}\n", q(c.label), c.workload, c.allocator, to_string(r.device.kind),
                         q(r.device.name), c.capacity_bytes, std::string(before_error - 6 + 1, ','), q(c.error),
                         std::string(kAfterError, ','));
      continue;
    }
    Spread sps = spread_of(c.runs, [](auto& x) { return x.steps_per_s; });
    Spread tps = spread_of(c.runs, [](auto& x) { return x.tokens_per_s; });
    out += fmt::format("{},{},{},{},{},{},{},{},{:.6f},{},{},{},{},{:.6f},{},{},{},{},{},{},{},{},{},{},{},{},"
                       "{},{:.6f},{},",
                       q(c.label), c.workload, c.allocator, to_string(r.device.kind), q(r.device.name),
                       c.capacity_bytes, m->peak_reserved_bytes, m->peak_allocated_bytes, m->fragmentation,
                       m->device_allocs, m->device_frees, m->allocs, m->cache_hits, m->hit_rate(), csv_rate(sps.median),
                       csv_rate(sps.min), csv_rate(sps.max), csv_rate(tps.median), c.runs.size(), c.throughput_modeled ? 1 : 0,
                       c.memory_modeled ? 1 : 0, m->first_oom ? to_string(m->first_oom->kind) : "",
                       m->first_oom ? std::to_string(m->first_oom->step) : "",
                       m->first_oom ? std::to_string(m->first_oom->event) : "",
                       m->first_oom ? std::to_string(m->first_oom->requested_bytes) : "", m->ooms,
                       csv_rate(spread_of(c.runs, [](auto& x) { return x.padded_tokens_per_s; }).median),
                       alloc_share(c, *m),
                       harness_share(c, *m) ? fmt::format("{:.6f}", *harness_share(c, *m)) : std::string());
    const CaseSummary s = summarize(c);
    out += fmt::format("{:.0f},{:.0f},{:.6f},{:.6f},{},{},{},", s.peak_reserved.min, s.peak_reserved.max,
                       s.fragmentation.min, s.fragmentation.max, csv_rate(s.tokens_per_s.min), csv_rate(s.tokens_per_s.max),
                       c.error.empty() ? "" : q(c.error));
    out += oom_csv_cells(c, *m) + ",";
    // The need, the fragmentation figures and the first run's first OOM in words.
    const std::optional<OomRecord>& first = c.runs.front().first_oom;
    out += c.need ? fmt::format("{},{},{},{},", c.need->peak_requested_bytes, c.need->peak_rounded_bytes,
                                c.need->peak_requested_step, c.need->peak_requested_event)
                  : std::string(",,,,");
    out += fmt::format("{},{},{},{},{}\n", m->allocated_at_peak_reserved_bytes,
                       m->first_oom ? fmt::format("{:.6f}", m->first_oom->fragmentation()) : std::string(),
                       first ? std::to_string(first->need_from_here_bytes) : std::string(),
                       first ? q(oom_diagnosis_text(r, index)) : std::string(), first ? q(first->message) : std::string());
  }
  return out;
}

}  // namespace gmb
