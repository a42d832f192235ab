#include "harness/report/columns.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "common/units.h"
#include "harness/report/oom_diagnosis.h"
#include "harness/run/fragmentation_metrics.h"

namespace gmb {

namespace {

const RunMetrics* run_of(const CaseRow& r) { return r.s.run; }

// A figure of the representative run; empty where the case did not run.
template <typename F>
CellValue of_run(const CaseRow& r, F f) {
  return run_of(r) ? CellValue(f(*run_of(r))) : CellValue();
}
// A figure of the representative run's first OOM; empty where there is none.
template <typename F>
CellValue of_oom(const CaseRow& r, F f) {
  return run_of(r) && run_of(r)->first_oom ? CellValue(f(*run_of(r)->first_oom)) : CellValue();
}
// The first run's first OOM: the one the OOM files and the diagnosis are about.
const OomRecord* first_run_oom(const CaseRow& r) {
  return run_of(r) && r.c.runs.front().first_oom ? &*r.c.runs.front().first_oom : nullptr;
}
template <typename F>
CellValue of_need(const CaseRow& r, F f) {
  return run_of(r) && r.c.need ? CellValue(std::uint64_t(f(*r.c.need))) : CellValue();
}
template <typename F>
CellValue spread_field(const CaseRow& r, F metric, double Spread::*field) {
  if (!run_of(r)) return {};
  return spread_of(r.c.runs, metric).*field;
}
std::uint64_t u(std::uint64_t v) { return v; }
// An optional figure: empty where the allocator cannot give it.
template <typename T>
CellValue opt_cell(const std::optional<T>& v) {
  return v ? CellValue(*v) : CellValue();
}

const auto kStepsPerS = [](const RunMetrics& m) { return m.steps_per_s; };
const auto kTokensPerS = [](const RunMetrics& m) { return m.tokens_per_s; };
const auto kPaddedPerS = [](const RunMetrics& m) { return m.padded_tokens_per_s; };

// The OOM cell of the tables: the first OOM in words, with the count by kind.
std::string oom_words(const RunMetrics& m) {
  if (!m.first_oom) return "none";
  const auto& o = *m.first_oom;
  // No request of the workload's failed: a library's setup did (the runner's setup OOM).
  const std::string what = o.requested_bytes == 0 && !o.origin.empty()
                               ? o.origin
                               : fmt::format("event {}, {}", o.event, format_bytes(o.requested_bytes));
  return fmt::format("{} at step {} ({}){}", to_string(o.kind), o.step, what,
                     m.ooms > 1 ? fmt::format(", {} OOMs ({} fragmentation, {} capacity)", m.ooms,
                                              m.fragmentation_ooms, m.capacity_ooms)
                                : "");
}

std::vector<Column> make_columns() {
  using P = Provenance;
  std::vector<Column> c;
  c.reserve(96);  // `add` hands out a pointer to the last column
  auto add = [&](Column col) { c.push_back(col); return &c.back(); };
  // What the case is.
  add({"label", "", Unit::Text, [](const CaseRow& r) -> CellValue { return r.c.label; }});
  add({"workload", "", Unit::Name, [](const CaseRow& r) -> CellValue { return r.c.workload; }});
  add({"allocator", "", Unit::Name, [](const CaseRow& r) -> CellValue { return r.c.allocator; }});
  add({"device_kind", "", Unit::Name,
       [](const CaseRow& r) -> CellValue { return std::string(to_string(r.report.device.kind)); }});
  add({"device_name", "", Unit::Text, [](const CaseRow& r) -> CellValue { return r.report.device.name; }});
  add({"capacity_bytes", "", Unit::Bytes, [](const CaseRow& r) -> CellValue { return u(r.c.capacity_bytes); }});
  // Memory.
  Column* col = add({"peak_reserved_bytes", "peak reserved", Unit::Bytes,
                     [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.peak_reserved_bytes); }); },
                     [](const CaseRow& r) -> std::optional<Spread> { return r.s.peak_reserved; }});
  col->provenance = P::Memory;
  col->better = Better::Lower;
  col->relative = Relative::Ratio;
  col->latex_top = "Peak";
  col->latex_bottom = "reserved";
  col = add({"peak_allocated_bytes", "peak allocated", Unit::Bytes,
             [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.peak_allocated_bytes); }); },
             [](const CaseRow& r) -> std::optional<Spread> { return r.s.peak_allocated; }});
  col->latex_top = "Peak";
  col->latex_bottom = "allocated";
  // Fragmentation comes from the reserved figure, so it is modeled where that is.
  col = add({"fragmentation", "fragmentation", Unit::Fraction,
             [](const CaseRow& r) { return of_run(r, [](auto& m) { return m.fragmentation; }); },
             [](const CaseRow& r) -> std::optional<Spread> { return r.s.fragmentation; }});
  col->provenance = P::Memory;
  col->better = Better::Lower;
  col->latex_top = "Frag.";
  col->latex_bottom = "(\\%)";
  add({"device_mallocs", "device mallocs", Unit::Count,
       [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.device_allocs); }); }});
  add({"device_frees", "device frees", Unit::Count,
       [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.device_frees); }); }});
  add({"allocs", "", Unit::Count, [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.allocs); }); }});
  add({"cache_hits", "", Unit::Count,
       [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.cache_hits); }); }});
  add({"hit_rate", "hit rate", Unit::Fraction,
       [](const CaseRow& r) { return of_run(r, [](auto& m) { return m.hit_rate(); }); }});
  // Throughput: medians over the runs.
  col = add({"steps_per_s", "steps/s", Unit::PerSecond,
             [](const CaseRow& r) { return spread_field(r, kStepsPerS, &Spread::median); },
             [](const CaseRow& r) -> std::optional<Spread> { return r.s.steps_per_s; }, Applies::Steps,
             P::Throughput, Better::Higher});
  col->rate = true;
  col->relative = Relative::Change;
  col->latex_top = "Steps";
  col->latex_bottom = "/s";
  add({"steps_per_s_min", "", Unit::PerSecond, [](const CaseRow& r) { return spread_field(r, kStepsPerS, &Spread::min); }});
  add({"steps_per_s_max", "", Unit::PerSecond, [](const CaseRow& r) { return spread_field(r, kStepsPerS, &Spread::max); }});
  col = add({"tokens_per_s", "tokens/s real", Unit::PerSecond,
             [](const CaseRow& r) { return spread_field(r, kTokensPerS, &Spread::median); },
             [](const CaseRow& r) -> std::optional<Spread> { return r.s.tokens_per_s; }, Applies::Tokens,
             P::Throughput, Better::Higher});
  col->rate = true;
  col->latex_top = "Tokens";
  col->latex_bottom = "/s";
  add({"repeats", "", Unit::Count, [](const CaseRow& r) { return of_run(r, [&](auto&) { return u(r.c.runs.size()); }); }});
  add({"throughput_modeled", "", Unit::Flag,
       [](const CaseRow& r) { return of_run(r, [&](auto&) { return u(r.c.throughput_modeled); }); }});
  add({"memory_modeled", "", Unit::Flag,
       [](const CaseRow& r) { return of_run(r, [&](auto&) { return u(r.c.memory_modeled); }); }});
  add({"oom_kind", "", Unit::Name, [](const CaseRow& r) { return of_oom(r, [](auto& o) { return std::string(to_string(o.kind)); }); }});
  add({"oom_step", "", Unit::Count, [](const CaseRow& r) { return of_oom(r, [](auto& o) { return u(o.step); }); }});
  add({"oom_event", "", Unit::Count, [](const CaseRow& r) { return of_oom(r, [](auto& o) { return u(o.event); }); }});
  add({"oom_requested_bytes", "", Unit::Bytes,
       [](const CaseRow& r) { return of_oom(r, [](auto& o) { return u(o.requested_bytes); }); }});
  add({"ooms", "", Unit::Count, [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.ooms); }); }});
  col = add({"padded_tokens_per_s", "tokens/s padded", Unit::PerSecond,
             [](const CaseRow& r) { return spread_field(r, kPaddedPerS, &Spread::median); }, nullptr, Applies::Tokens,
             P::Throughput, Better::Higher});
  col->rate = true;
  col = add({"alloc_time_share", "in allocator calls", Unit::Fraction,
             [](const CaseRow& r) { return of_run(r, [&](auto& m) { return alloc_share(r.c, m); }); }, nullptr,
             Applies::Every, P::Throughput});
  col->percent_decimals = 2;
  col = add({"harness_overhead_share", "harness overhead", Unit::Fraction, [](const CaseRow& r) -> CellValue {
               if (!run_of(r)) return {};
               auto share = harness_share(r.c, *run_of(r));
               return share ? CellValue(*share) : CellValue();
             }});
  col->percent_decimals = 2;
  add({"peak_reserved_bytes_min", "", Unit::Bytes,
       [](const CaseRow& r) { return of_run(r, [&](auto&) { return u(std::uint64_t(r.s.peak_reserved.min)); }); }});
  add({"peak_reserved_bytes_max", "", Unit::Bytes,
       [](const CaseRow& r) { return of_run(r, [&](auto&) { return u(std::uint64_t(r.s.peak_reserved.max)); }); }});
  add({"fragmentation_min", "", Unit::Fraction, [](const CaseRow& r) { return of_run(r, [&](auto&) { return r.s.fragmentation.min; }); }});
  add({"fragmentation_max", "", Unit::Fraction, [](const CaseRow& r) { return of_run(r, [&](auto&) { return r.s.fragmentation.max; }); }});
  add({"tokens_per_s_min", "", Unit::PerSecond, [](const CaseRow& r) { return spread_field(r, kTokensPerS, &Spread::min); }});
  add({"tokens_per_s_max", "", Unit::PerSecond, [](const CaseRow& r) { return spread_field(r, kTokensPerS, &Spread::max); }});
  add({"error", "", Unit::Text, [](const CaseRow& r) { return r.c.error.empty() ? CellValue() : CellValue(r.c.error); }});
  // The first OOM of the representative run, in detail.
  add({"oom_allocated_bytes", "", Unit::Bytes, [](const CaseRow& r) { return of_oom(r, [](auto& o) { return u(o.allocated_bytes); }); }});
  add({"oom_reserved_bytes", "", Unit::Bytes, [](const CaseRow& r) { return of_oom(r, [](auto& o) { return u(o.reserved_bytes); }); }});
  add({"oom_cached_bytes", "", Unit::Bytes, [](const CaseRow& r) { return of_oom(r, [](auto& o) { return u(o.cached_bytes); }); }});
  add({"oom_largest_free_block_bytes", "", Unit::Bytes,
       [](const CaseRow& r) { return of_oom(r, [](auto& o) { return u(o.largest_free_block); }); }});
  add({"oom_capacity_bytes", "", Unit::Bytes, [](const CaseRow& r) { return of_oom(r, [](auto& o) { return u(o.capacity_bytes); }); }});
  add({"oom_retried", "", Unit::Flag,
       [](const CaseRow& r) { return of_oom(r, [](auto& o) { return u(o.retried_after_freeing_cache ? 1 : 0); }); }});
  add({"fragmentation_ooms", "", Unit::Count, [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.fragmentation_ooms); }); }});
  add({"capacity_ooms", "", Unit::Count, [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.capacity_ooms); }); }});
  add({"capacity_requested_bytes", "", Unit::Bytes,
       [](const CaseRow& r) { return of_run(r, [&](auto&) { return u(r.c.capacity_requested_bytes); }); }});
  add({"ballast_bytes", "", Unit::Bytes, [](const CaseRow& r) { return of_run(r, [&](auto&) { return u(r.c.ballast_bytes); }); }});
  // The workload's own need.
  add({"need_peak_requested_bytes", "", Unit::Bytes, [](const CaseRow& r) { return of_need(r, [](auto& n) { return n.peak_requested_bytes; }); }});
  add({"need_peak_rounded_bytes", "", Unit::Bytes, [](const CaseRow& r) { return of_need(r, [](auto& n) { return n.peak_rounded_bytes; }); }});
  add({"need_peak_step", "", Unit::Count, [](const CaseRow& r) { return of_need(r, [](auto& n) { return n.peak_requested_step; }); }});
  add({"need_peak_event", "", Unit::Count, [](const CaseRow& r) { return of_need(r, [](auto& n) { return n.peak_requested_event; }); }});
  add({"allocated_at_peak_reserved_bytes", "", Unit::Bytes,
       [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(m.allocated_at_peak_reserved_bytes); }); }});
  add({"fragmentation_at_first_oom", "", Unit::Fraction, [](const CaseRow& r) { return of_oom(r, [](auto& o) { return o.fragmentation(); }); }});
  add({"oom_need_from_here_bytes", "", Unit::Bytes, [](const CaseRow& r) -> CellValue {
         const OomRecord* o = first_run_oom(r);
         return o ? CellValue(u(o->need_from_here_bytes)) : CellValue();
       }});
  add({"oom_what_would_fix_it", "", Unit::Text, [](const CaseRow& r) -> CellValue {
         return first_run_oom(r) ? CellValue(oom_diagnosis_text(r.report, r.index)) : CellValue();
       }});
  add({"oom_message", "", Unit::Text, [](const CaseRow& r) -> CellValue {
         const OomRecord* o = first_run_oom(r);
         return o ? CellValue(o->message) : CellValue();
       }});
  // Added after the columns above (scripts may read them by position): the row's and the
  // group's names as the tables show them.
  add({"workload_label", "", Unit::Text, [](const CaseRow& r) -> CellValue { return r.c.workload_label; }});
  add({"allocator_label", "", Unit::Text, [](const CaseRow& r) -> CellValue { return row_name(r.c); }});
  // The published fragmentation metrics beside gpumembench's own (docs/METRICS.md); the tables
  // show a family only when asked. Empty where the allocator cannot give the figure.
  auto family = [&](Column* k, std::string_view f, std::string_view top, std::string_view bottom) {
    k->metric_family = f;
    k->provenance = P::Memory;
    k->latex_top = top;
    k->latex_bottom = bottom;
  };
  col = add({"fragmentation_gmlake", "frag. (GMLake)", Unit::Fraction,
             [](const CaseRow& r) { return run_of(r) ? opt_cell(gmlake_fragmentation(*run_of(r))) : CellValue(); }});
  family(col, "gmlake", "Frag.", "GMLake (\\%)");
  col->better = Better::Lower;
  col = add({"utilization_stalloc", "utilization (STAlloc)", Unit::Fraction,
             [](const CaseRow& r) { return run_of(r) ? opt_cell(stalloc_utilization(*run_of(r))) : CellValue(); }});
  family(col, "stalloc", "Util.", "STAlloc (\\%)");
  col->better = Better::Higher;
  col = add({"waste_stalloc_bytes", "waste (STAlloc)", Unit::Bytes,
             [](const CaseRow& r) { return of_run(r, [](auto& m) { return u(stalloc_waste_bytes(m)); }); }});
  family(col, "stalloc", "Waste", "STAlloc");
  col->better = Better::Lower;
  col = add({"fragmentation_tf_at_peak", "BFC frag. at peak", Unit::Fraction, [](const CaseRow& r) {
               return run_of(r) ? opt_cell(tf_bfc_fragmentation(run_of(r)->free_space_at_peak_reserved)) : CellValue();
             }});
  family(col, "tf", "BFC frag.", "peak (\\%)");
  col->better = Better::Lower;
  col = add({"fragmentation_tf_at_first_oom", "BFC frag. at OOM", Unit::Fraction, [](const CaseRow& r) {
               return run_of(r) ? opt_cell(tf_bfc_fragmentation(run_of(r)->free_space_at_first_oom)) : CellValue();
             }});
  family(col, "tf", "BFC frag.", "OOM (\\%)");
  col->better = Better::Lower;
  col = add({"internal_free_bytes", "internal free (rounding)", Unit::Bytes, [](const CaseRow& r) {
               return run_of(r) ? opt_cell(internal_free_bytes(run_of(r)->free_space_at_peak_reserved)) : CellValue();
             }});
  family(col, "memory_viz", "Internal", "free");
  col = add({"external_free_bytes", "external free (gaps)", Unit::Bytes, [](const CaseRow& r) {
               return run_of(r) ? opt_cell(external_free_bytes(run_of(r)->free_space_at_peak_reserved)) : CellValue();
             }});
  family(col, "memory_viz", "External", "free");
  // The tables' OOM cell (not in the CSV: the oom_* columns hold its parts).
  col = add({"oom", "OOM", Unit::Text,
             [](const CaseRow& r) { return of_run(r, [](auto& m) { return oom_words(m); }); }});
  col->csv = false;
  col->provenance = P::Memory;
  return c;
}

}  // namespace

std::vector<CaseRow> case_rows(const RunReport& report) {
  std::vector<CaseRow> rows;
  rows.reserve(report.cases.size());
  for (std::size_t i = 0; i < report.cases.size(); ++i)
    rows.push_back(CaseRow{report, i, report.cases[i], summarize(report.cases[i])});
  return rows;
}

bool applies_to(Applies applies, const CaseResult& c) {
  switch (applies) {
    case Applies::Every: return true;
    case Applies::Steps:
    case Applies::Tokens: return c.workload == "transformer";
  }
  return true;
}

const std::vector<Column>& case_columns() {
  static const std::vector<Column> columns = make_columns();
  return columns;
}

bool shown_in_tables(const Column& col, const RunReport& report) {
  if (col.metric_family.empty()) return true;
  return std::find(report.metrics.begin(), report.metrics.end(), col.metric_family) != report.metrics.end();
}

const Column& column(std::string_view key) {
  for (const Column& c : case_columns())
    if (c.key == key) return c;
  throw std::logic_error(fmt::format("no report column named {}", key));
}

double as_number(const CellValue& v) {
  if (const auto* x = std::get_if<std::uint64_t>(&v)) return double(*x);
  if (const auto* x = std::get_if<double>(&v)) return *x;
  return 0;
}

bool is_empty(const CellValue& v) { return std::holds_alternative<std::monostate>(v); }

bool is_modeled(const Column& col, const CaseResult& c) {
  switch (col.provenance) {
    case Provenance::Exact: return false;
    case Provenance::Memory: return c.memory_modeled;
    case Provenance::Throughput: return c.throughput_modeled;
  }
  return false;
}

bool had_oom(const CaseResult& c) {
  return std::any_of(c.runs.begin(), c.runs.end(), [](const RunMetrics& m) { return m.ooms > 0; });
}

Bytes group_capacity(const CaseResult& c) {
  return c.capacity_requested_bytes ? c.capacity_requested_bytes : c.capacity_bytes;
}

std::string CaseGroup::heading() const {
  return capacity_bytes ? workload_label + " @ " + format_bytes(capacity_bytes) : workload_label;
}

std::string row_name(const CaseResult& c) { return c.allocator_label.empty() ? c.label : c.allocator_label; }

std::optional<std::size_t> find_baseline(const RunReport& report, const std::vector<std::size_t>& cases,
                                         const std::string& name) {
  if (name.empty()) return std::nullopt;
  for (std::size_t i : cases)
    if (report.cases[i].allocator_label == name) return i;
  std::optional<std::size_t> found;
  for (std::size_t i : cases)
    if (report.cases[i].allocator == name) {
      if (found) return std::nullopt;  // several settings of that allocator: name one by its label
      found = i;
    }
  return found;
}

std::vector<CaseGroup> case_groups(const RunReport& report) {
  std::vector<CaseGroup> groups;
  for (std::size_t i = 0; i < report.cases.size(); ++i) {
    const CaseResult& c = report.cases[i];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const CaseGroup& g) {
      return g.workload_label == c.workload_label && g.capacity_bytes == group_capacity(c);
    });
    if (it == groups.end()) {
      groups.push_back(CaseGroup{c.workload_label, group_capacity(c), {}, std::nullopt});
      it = groups.end() - 1;
    }
    it->cases.push_back(i);
  }
  for (CaseGroup& g : groups) g.baseline = find_baseline(report, g.cases, report.baseline);
  return groups;
}

}  // namespace gmb
