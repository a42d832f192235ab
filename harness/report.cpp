#include "harness/report.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "allocators/units.h"
#include "harness/case_summary.h"
#include "harness/oom_diagnosis.h"
#include "harness/oom_report.h"
#include "harness/runner.h"
#include "harness/table_format.h"

namespace gmb {

namespace {

using nlohmann::json;

json oom_json(const std::optional<OomRecord>& oom) {
  if (!oom) return nullptr;
  json j{{"step", oom->step},
              {"event", oom->event},
              {"requested_bytes", oom->requested_bytes},
              {"allocated_bytes", oom->allocated_bytes},
              {"reserved_bytes", oom->reserved_bytes},
              {"cached_bytes", oom->cached_bytes},
              {"largest_free_block_bytes", oom->largest_free_block},
              {"capacity_bytes", oom->capacity_bytes},
              {"retried_after_freeing_cache", oom->retried_after_freeing_cache},
              {"kind", to_string(oom->kind)},
              {"need_from_here_bytes", oom->need_from_here_bytes},
              {"fragmentation", oom->fragmentation()},
              {"message", oom->message}};
  if (!oom->origin.empty()) j["origin"] = oom->origin;
  return j;
}

json need_json(const std::shared_ptr<const WorkloadNeed>& need) {
  if (!need) return nullptr;
  return json{{"peak_requested_bytes", need->peak_requested_bytes},
              {"peak_requested_step", need->peak_requested_step},
              {"peak_requested_event", need->peak_requested_event},
              {"peak_rounded_bytes", need->peak_rounded_bytes},
              {"peak_rounded_step", need->peak_rounded_step},
              {"peak_rounded_event", need->peak_rounded_event},
              {"steps", need->steps},
              {"events", need->events}};
}

json spread_json(const Spread& s) { return json{{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

json segments_json(const std::vector<SegmentInfo>& segments) {
  json out = json::array();
  for (const auto& s : segments) {
    json blocks = json::array();
    for (const auto& b : s.blocks)
      blocks.push_back({{"offset", b.offset}, {"size", b.size}, {"allocated", b.allocated}, {"mapped", b.mapped}});
    out.push_back({{"address", s.address}, {"size", s.size}, {"stream", s.stream}, {"pool", s.pool}, {"blocks", blocks}});
  }
  return out;
}

// Metrics of a case: the run with the median peak reserved stands for the case (its reserved,
// allocated and fragmentation belong together); rates are medians over the runs.
const RunMetrics* representative(const CaseResult& c) { return summarize(c).run; }

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

// A rate in the CSV: the raw figure, always in the same notation (six decimals at most, no
// exponent, no trailing zeros), whether the case had an OOM or not (the oom_* columns say so).
std::string csv_rate(double v) {
  std::string s = fmt::format("{:.6f}", v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::string oom_cell(const RunMetrics& m) {
  if (!m.first_oom) return "none";
  const auto& o = *m.first_oom;
  return fmt::format("{} at step {} (event {}, {}){}", to_string(o.kind), o.step, o.event,
                     format_bytes(o.requested_bytes),
                     m.ooms > 1 ? fmt::format(", {} OOMs ({} fragmentation, {} capacity)", m.ooms,
                                              m.fragmentation_ooms, m.capacity_ooms)
                                : "");
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

// Share of the run's time spent inside allocator calls: measured on the GPU; on sim, the
// modeled driver-call time over the modeled run time (the allocator's own CPU time is not
// part of the sim's model).
double alloc_share(const CaseResult& c, const RunMetrics& m) {
  if (m.seconds <= 0) return 0;
  return c.throughput_modeled ? m.modeled_call_seconds / m.seconds : m.alloc_seconds / m.seconds;
}
// Host time of the harness itself over the run's time: an upper bound on what the harness adds
// to a step (its work may overlap GPU kernels). Only where the time is measured: on sim the
// run's time is modeled and the harness's host time says nothing about it.
std::optional<double> harness_share(const CaseResult& c, const RunMetrics& m) {
  if (c.throughput_modeled || m.seconds <= 0) return std::nullopt;
  return m.harness_seconds / m.seconds;
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

json to_json(const RunReport& r) {
  json cases = json::array();
  for (const auto& c : r.cases) {
    const RunMetrics* m = representative(c);
    const std::size_t index = static_cast<std::size_t>(&c - r.cases.data());
    json j;
    j["label"] = c.label;
    j["workload"] = c.workload;
    j["workload_label"] = c.workload_label;
    j["allocator"] = c.allocator;
    j["allocator_label"] = c.allocator_label;
    j["options"] = c.options;
    j["capacity_bytes"] = c.capacity_bytes;
    j["capacity_requested_bytes"] = c.capacity_requested_bytes;
    j["ballast_bytes"] = c.ballast_bytes;
    if (!c.error.empty()) j["error"] = c.error;
    j["need"] = need_json(c.need);
    if (!m) {
      cases.push_back(j);
      continue;
    }
    j["peak_reserved_bytes"] = m->peak_reserved_bytes;
    j["peak_allocated_bytes"] = m->peak_allocated_bytes;
    j["fragmentation"] = m->fragmentation;
    j["fragmentation_at_peak_reserved"] = {{"fragmentation", m->fragmentation},
                                           {"reserved_bytes", m->peak_reserved_sampled_bytes},
                                           {"allocated_bytes", m->allocated_at_peak_reserved_bytes}};
    j["fragmentation_at_first_oom"] = m->first_oom ? json(m->first_oom->fragmentation()) : json(nullptr);
    j["memory_modeled"] = c.memory_modeled;
    j["throughput"] = {{"steps_per_s", spread_of(c.runs, [](auto& x) { return x.steps_per_s; }).median},
                       {"tokens_per_s", spread_of(c.runs, [](auto& x) { return x.tokens_per_s; }).median},
                       {"padded_tokens_per_s",
                        spread_of(c.runs, [](auto& x) { return x.padded_tokens_per_s; }).median},
                       {"modeled", c.throughput_modeled}};
    j["oom"] = oom_json(m->first_oom);
    if (!c.runs.empty() && c.runs.front().first_oom) {
      // About the first run's first OOM (the one the OOM files show).
      const SameCapacityCases same = same_capacity_cases(r, index);
      j["oom_diagnosis"] = {{"kind", to_string(c.runs.front().first_oom->kind)},
                            {"what_would_fix_it", oom_diagnosis_text(r, index)},
                            {"same_capacity_settings", same.others},
                            {"completed_at_same_capacity", same.completed},
                            {"message", c.runs.front().first_oom->message}};
    }
    j["ooms"] = m->ooms;
    if (!c.workload_notes.empty()) j["workload_notes"] = c.workload_notes;
    if (c.recorded_ooms)
      j["recorded_ooms"] = {{"count", c.recorded_ooms->count},
                            {"events", c.recorded_ooms->events},
                            {"whole_trace", c.recorded_ooms->whole_trace}};
    j["steps_completed"] = m->steps_completed;
    j["events"] = m->events;
    j["allocs"] = m->allocs;
    j["frees"] = m->frees;
    j["cache_hits"] = m->cache_hits;
    j["hit_rate"] = m->hit_rate();
    j["device_mallocs"] = m->device_allocs;
    j["device_frees"] = m->device_frees;
    j["seconds"] = spread_json(spread_of(c.runs, [](auto& x) { return x.seconds; }));
    j["alloc_seconds"] = spread_json(spread_of(c.runs, [](auto& x) { return x.alloc_seconds; }));
    j["alloc_time_share"] = alloc_share(c, *m);
    j["compute_call_seconds"] = m->compute_call_seconds;
    j["sync_seconds"] = m->sync_seconds;
    j["modeled_call_seconds"] = m->modeled_call_seconds;
    j["harness_seconds"] = spread_json(spread_of(c.runs, [](auto& x) { return x.harness_seconds; }));
    j["event_generation_seconds"] =
        spread_json(spread_of(c.runs, [](auto& x) { return x.event_generation_seconds; }));
    auto hs = harness_share(c, *m);
    j["harness_overhead_share"] = hs ? json(*hs) : json(nullptr);
    j["repeats"] = c.runs.size();
    j["spread"] = {
        {"steps_per_s", spread_json(spread_of(c.runs, [](auto& x) { return x.steps_per_s; }))},
        {"peak_reserved_bytes", spread_json(spread_of(c.runs, [](auto& x) { return x.peak_reserved_bytes; }))},
        {"peak_allocated_bytes", spread_json(spread_of(c.runs, [](auto& x) { return x.peak_allocated_bytes; }))},
        {"fragmentation", spread_json(spread_of(c.runs, [](auto& x) { return x.fragmentation; }))},
        {"tokens_per_s", spread_json(spread_of(c.runs, [](auto& x) { return x.tokens_per_s; }))}};
    json steps = json::array();
    for (const auto& s : c.steps)
      steps.push_back({s.step, s.allocated_bytes, s.reserved_bytes, s.peak_allocated_bytes,
                       s.peak_reserved_bytes, s.ooms, s.step_peak_allocated_bytes, s.step_peak_reserved_bytes,
                       s.need_bytes, s.allocated_at_peak_reserved_bytes});
    // allocated/reserved: at the step's end; peak_*: running peaks; step_peak_*: the most during
    // the step; need_bytes: the workload's most live requested bytes during the step;
    // allocated_at_peak_reserved_bytes: with peak_reserved_bytes, fragmentation at peak reserved
    // so far (1 - it / peak_reserved_bytes).
    j["step_series"] = {{"columns", {"step", "allocated_bytes", "reserved_bytes", "peak_allocated_bytes",
                                     "peak_reserved_bytes", "ooms", "step_peak_allocated_bytes",
                                     "step_peak_reserved_bytes", "need_bytes", "allocated_at_peak_reserved_bytes"}},
                        {"rows", steps}};
    json stats = json::object();
    for (const auto& [k, v] : c.memory_stats) stats[k] = v;
    j["memory_stats"] = stats;
    if (!c.oom_segments.empty()) j["oom_block_map"] = segments_json(c.oom_segments);
    j["ooms_by_kind"] = {{"fragmentation", m->fragmentation_ooms}, {"capacity", m->capacity_ooms}};
    if (has_oom_details(c)) {
      std::string stem = "oom/" + oom_file_stem(index, c);
      j["oom_files"] = {{"state_json", stem + ".json"}, {"block_map_svg", stem + ".svg"},
                        {"usage_csv", stem + ".timeline.csv"}, {"usage_svg", stem + ".timeline.svg"},
                        {"ooms_csv", stem + ".ooms.csv"}};
    }
    cases.push_back(j);
  }
  json out{{"tool", {{"name", "gpumembench"}, {"version", r.tool_version}}},
              {"config", {{"name", r.config_name}, {"path", r.config_path}}},
              {"command", r.command_line},
              {"started_at", r.started_at},
              {"device",
               {{"kind", to_string(r.device.kind)},
                {"name", r.device.name},
                {"capacity_bytes", r.device.capacity_bytes},
                {"total_bytes", r.device.total_bytes},
                {"ballast_bytes", r.device.ballast_bytes},
                {"page_bytes", r.device.page_bytes},
                {"driver", r.device.driver}}},
              {"run", {{"on_oom", r.on_oom}, {"repeat", r.repeat}}},
              {"cases", cases}};
  if (!r.capacity_sweep.empty()) out["device"]["capacity_sweep_bytes"] = r.capacity_sweep;
  return out;
}

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

std::string utc_now(const char* format) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", path));
    out << text;
    if (!out) throw std::runtime_error(fmt::format("error writing {}", path));
  }
  std::filesystem::rename(tmp, path);
}

void write_reports(const RunReport& r, const std::string& dir, const std::vector<std::string>& formats) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  auto has = [&](const char* f) { return std::find(formats.begin(), formats.end(), f) != formats.end(); };
  if (has("json")) write_file_atomically((fs::path(dir) / "results.json").string(), to_json(r).dump(2) + "\n");
  if (has("csv")) write_file_atomically((fs::path(dir) / "results.csv").string(), csv_table(r));
  if (has("md")) write_file_atomically((fs::path(dir) / "results.md").string(), markdown_table(r));
  if (has("latex")) write_file_atomically((fs::path(dir) / "results.tex").string(), latex_table(r));
  bool any_timeline = std::any_of(r.cases.begin(), r.cases.end(), [](auto& c) { return !c.timeline.empty(); });
  if (any_timeline) {
    fs::create_directories(fs::path(dir) / "timelines");
    for (std::size_t i = 0; i < r.cases.size(); ++i)
      if (!r.cases[i].timeline.empty())
        write_timeline_csv((fs::path(dir) / "timelines" / fmt::format("case{:02}.csv", i)).string(),
                           r.cases[i].timeline);
  }
  write_oom_reports(r, dir);  // oom/: block map, usage series and OOM list per case with an OOM
}

}  // namespace gmb
