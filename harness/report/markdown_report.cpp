// results.md and the terminal: the tables a person reads.
#include "harness/report/markdown_report.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/units.h"
#include "harness/report/case_summary.h"
#include "harness/report/oom_block_map.h"
#include "harness/report/oom_diagnosis.h"
#include "harness/report/table_format.h"

namespace gmb {

namespace {

// "value [min–max]" where the runs differ in what is printed.
template <typename Show>
std::string with_spread(double value, const Spread& s, Show show) {
  std::string lo = show(s.min), hi = show(s.max);
  return lo == hi ? show(value) : fmt::format("{} [{}–{}]", show(value), lo, hi);
}
std::string percent_text(double v) { return fmt::format("{:.1f}%", 100 * v); }

// One format per column for the Markdown tables of a run: every byte figure in one unit (that
// of the largest peak reserved), every rate column with one number of decimals.
struct ColumnFormats {
  ByteUnit unit{"MiB", double(MiB), 1};
  NumberColumn steps, tokens, padded;
  std::set<std::string> workloads_with_tokens;  // workloads that count tokens (transformer)
  std::string bytes(double v) const { return format_in(v, unit) + " " + unit.name; }
};

ColumnFormats column_formats(const RunReport& r) {
  ColumnFormats f;
  double largest = 0;
  std::vector<double> steps, tokens, padded;
  for (const auto& c : r.cases) {
    if (c.runs.empty()) continue;
    const CaseSummary s = summarize(c);
    largest = std::max(largest, s.peak_reserved.max);
    for (const auto& st : c.steps) largest = std::max(largest, double(st.peak_reserved_bytes));
    Spread p = spread_of(c.runs, [](auto& x) { return x.padded_tokens_per_s; });
    for (double v : {s.steps_per_s.median, s.steps_per_s.min, s.steps_per_s.max}) steps.push_back(v);
    for (double v : {s.tokens_per_s.median, s.tokens_per_s.min, s.tokens_per_s.max}) tokens.push_back(v);
    for (double v : {p.median, p.min, p.max}) padded.push_back(v);
    if (s.tokens_per_s.max > 0 || p.max > 0) f.workloads_with_tokens.insert(c.workload_label);
  }
  f.unit = byte_unit_for(largest);
  f.steps = number_column(steps);
  f.tokens = number_column(tokens);
  f.padded = number_column(padded);
  return f;
}

// A case with an OOM in any run: its rates are those of the steps it ran, marked the same way
// in every table (and in LaTeX), never left out and never shown as if comparable.
bool had_oom(const CaseResult& c) {
  return std::any_of(c.runs.begin(), c.runs.end(), [](const RunMetrics& m) { return m.ooms > 0; });
}
const char* kOomRateMark = " (OOM)";

std::string oom_cell(const RunMetrics& m) {
  if (!m.first_oom) return "none";
  const auto& o = *m.first_oom;
  return fmt::format("{} at step {} (event {}, {}){}", to_string(o.kind), o.step, o.event,
                     format_bytes(o.requested_bytes),
                     m.ooms > 1 ? fmt::format(", {} OOMs ({} fragmentation, {} capacity)", m.ooms,
                                              m.fragmentation_ooms, m.capacity_ooms)
                                : "");
}


// On a GPU the ballast leaves a little less or more than asked: say what each case really had.
std::string capacity_left_note(const RunReport& r) {
  std::string out;
  std::vector<Bytes> seen;
  for (const auto& c : r.cases) {
    if (!c.capacity_requested_bytes || c.capacity_requested_bytes == c.capacity_bytes) continue;
    if (std::find(seen.begin(), seen.end(), c.capacity_requested_bytes) != seen.end()) continue;
    seen.push_back(c.capacity_requested_bytes);
    out += fmt::format("{}asked {} -> {} bytes left", out.empty() ? "" : "; ", format_bytes(c.capacity_requested_bytes),
                       c.capacity_bytes);
  }
  return out.empty() ? out : "\nCapacity left to the allocator after the ballast (cudaMemGetInfo): " + out + ".\n";
}

// One row per case with an OOM: what would fix it first, then every detail of the first OOM and
// the count by kind; then the allocator's own message for each (PyTorch's text for caching).
std::string oom_details_table(const RunReport& r) {
  std::string out, messages;
  // A trace that records where each request came from adds a column.
  bool origins = false;
  for (const CaseResult& c : r.cases)
    origins = origins || (!c.runs.empty() && c.runs.front().first_oom && !c.runs.front().first_oom->origin.empty());
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const CaseResult& c = r.cases[i];
    const RunMetrics* m = c.runs.empty() ? nullptr : &c.runs.front();
    if (!m || !m->first_oom) continue;
    if (out.empty())
      out = "\n| case (first OOM) | kind | what would fix it | step | event | request | allocated | reserved | cached "
            "| largest free block | fragmentation at the OOM | capacity left | retried | OOMs: fragmentation / capacity "
            "| block map |" + std::string(origins ? " requested at |" : "") + "\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|" + (origins ? "---|" : "") + "\n";
    const OomRecord& o = *m->first_oom;
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1f}% | {} | {} | {} / {} | {} |{}\n",
                       markdown_escape(c.label), to_string(o.kind), markdown_escape(oom_diagnosis_text(r, i)), o.step,
                       o.event, format_bytes(o.requested_bytes), format_bytes(o.allocated_bytes),
                       format_bytes(o.reserved_bytes), format_bytes(o.cached_bytes), format_bytes(o.largest_free_block),
                       100 * o.fragmentation(), format_bytes(o.capacity_bytes),
                       o.retried_after_freeing_cache ? "yes" : "no", m->fragmentation_ooms, m->capacity_ooms,
                       has_oom_details(c) ? "oom/" + oom_file_stem(i, c) + ".svg" : "",
                       origins ? " " + markdown_escape(o.origin) + " |" : "");
    if (!o.message.empty()) messages += fmt::format("- {}: {}\n", markdown_escape(c.label), markdown_escape(o.message));
  }
  if (!messages.empty()) out += "\nThe allocator's own message at each first OOM:\n\n" + messages;
  return out;
}


// Running peaks at a quarter, half, three quarters and all of the first run's steps:
// "peak reserved (fragmentation)", to show fragmentation growing (or not) over a run.
std::string over_steps_row(const CaseResult& c, const ColumnFormats& f) {
  std::string row;
  const auto& st = c.steps;
  for (int q = 1; q <= 4; ++q) {
    std::size_t i = (st.size() * q + 3) / 4;
    i = i ? i - 1 : 0;
    const StepSample& x = st[i];
    // Fragmentation at peak reserved so far, as in the main table.
    double frag = x.peak_reserved_sampled_bytes ? 1.0 - double(x.allocated_at_peak_reserved_bytes) /
                                                            double(x.peak_reserved_sampled_bytes)
                                                : 0;
    row += fmt::format(" {}: {} ({:.1f}%) |", x.step + 1, f.bytes(double(x.peak_reserved_bytes)), 100 * frag);
  }
  return row;
}


}  // namespace

std::string markdown_table(const RunReport& r) {
  std::string out;
  bool modeled = false;
  std::string capacity = format_bytes(r.device.capacity_bytes);
  if (!r.capacity_sweep.empty()) {
    capacity = "capacity sweep";
    for (std::size_t i = 0; i < r.capacity_sweep.size(); ++i)
      capacity += (i ? ", " : " ") + format_bytes(r.capacity_sweep[i]);
  } else {
    capacity = "capacity " + capacity;
  }
  out += fmt::format("{} on {} ({}, {}), {} run(s) per case\n\n", r.config_name, r.device.name,
                     to_string(r.device.kind), capacity, r.repeat);
  const ColumnFormats f = column_formats(r);
  auto bytes = [&](double v) { return f.bytes(v); };
  bool oom_rates = false;
  // A rate cell: the column's format; "–" where the workload counts no tokens; " (OOM)" after
  // the rate of a case with an OOM.
  auto rate = [&](const CaseResult& c, const NumberColumn& format, double v, const std::string& spread, bool tokens) {
    if (tokens && !f.workloads_with_tokens.count(c.workload_label)) return std::string("–");
    std::string text = spread.empty() ? format(v) : spread;
    if (c.throughput_modeled) text += " (modeled)";
    if (had_oom(c)) {
      text += kOomRateMark;
      oom_rates = true;
    }
    return text;
  };
  out += "| case | peak reserved | peak allocated | fragmentation | device mallocs | device frees | hit rate | steps/s | OOM |\n";
  out += "|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const auto& c : r.cases) {
    const RunMetrics* m = representative(c);
    if (!m) {
      out += fmt::format("| {} | error: {} | | | | | | | |\n", markdown_escape(c.label), markdown_escape(c.error));
      continue;
    }
    std::string mm = c.memory_modeled ? " (modeled)" : "";
    modeled = modeled || c.memory_modeled || c.throughput_modeled;
    const CaseSummary s = summarize(c);
    // Fragmentation comes from the reserved figure, so it is modeled where that is.
    out += fmt::format("| {} | {}{} | {} | {}{} | {} | {} | {:.1f}% | {} | {} |\n", markdown_escape(c.label),
                       with_spread(double(m->peak_reserved_bytes), s.peak_reserved, bytes), mm,
                       with_spread(double(m->peak_allocated_bytes), s.peak_allocated, bytes),
                       with_spread(m->fragmentation, s.fragmentation, percent_text), mm, m->device_allocs,
                       m->device_frees, 100 * m->hit_rate(),
                       rate(c, f.steps, 0, with_spread(s.steps_per_s.median, s.steps_per_s, f.steps), false),
                       markdown_escape(oom_cell(*m)));
  }
  // Where the time went, and tokens: real ones and with padding.
  out += "\n| case | steps/s | tokens/s real | tokens/s padded | in allocator calls | harness overhead |\n";
  out += "|---|---:|---:|---:|---:|---:|\n";
  for (const auto& c : r.cases) {
    const RunMetrics* m = representative(c);
    if (!m) continue;
    std::string tm = c.throughput_modeled ? " (modeled)" : "";
    auto hs = harness_share(c, *m);
    out += fmt::format("| {} | {} | {} | {} | {:.2f}%{} | {} |\n", markdown_escape(c.label),
                       rate(c, f.steps, spread_of(c.runs, [](auto& x) { return x.steps_per_s; }).median, "", false),
                       rate(c, f.tokens, spread_of(c.runs, [](auto& x) { return x.tokens_per_s; }).median, "", true),
                       rate(c, f.padded, spread_of(c.runs, [](auto& x) { return x.padded_tokens_per_s; }).median, "", true),
                       100 * alloc_share(c, *m), tm, hs ? fmt::format("{:.2f}%", 100 * *hs) : "–");
  }
  // Peak reserved and fragmentation as the steps go by (first run), where there are steps.
  bool any_steps = std::any_of(r.cases.begin(), r.cases.end(), [](auto& c) { return c.steps.size() >= 4; });
  if (any_steps) {
    out += "\n| case | peak reserved (fragmentation) after step: 1/4 | 1/2 | 3/4 | all |\n";
    out += "|---|---:|---:|---:|---:|\n";
    for (const auto& c : r.cases)
      if (c.steps.size() >= 4) out += fmt::format("| {} |{}\n", markdown_escape(c.label), over_steps_row(c, f));
  }
  out += oom_details_table(r) + capacity_left_note(r);
  if (modeled)
    out += "\n(modeled): figure from the simulated device's model of the driver or of the step time, not a measurement.\n";
  if (oom_rates)
    out += std::string(modeled ? "" : "\n") +
           "(OOM): the rate of the steps run by a case with an OOM (stopped or skipping steps); not comparable.\n";
  if (std::any_of(r.cases.begin(), r.cases.end(), [](auto& c) { return c.runs.size() > 1; }))
    out += std::string(modeled || oom_rates ? "" : "\n") +
           "Several runs per case: memory figures from the run with the median peak reserved, rates the median "
           "over the runs; [min–max] where the runs differ.\n";
  return out;
}

}  // namespace gmb
