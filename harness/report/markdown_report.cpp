// results.md and the terminal: the tables a person reads. One section per workload and
// capacity (columns.h's groups), the workload named once in its heading; each section's table
// has the columns of the column model that mean something for that workload and hold a figure
// for at least one of its rows, then the peaks as the steps go by and the details of each first
// OOM. With a baseline, each case relative to it.
#include "harness/report/markdown_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/units.h"
#include "harness/report/columns.h"
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

const char* kModeledMark = " (modeled)";
const char* kOomRateMark = " (OOM)";

// What the footnotes under the tables must explain.
struct Marks {
  bool modeled = false, oom_rate = false;
  bool ratio = false, change = false;  // baseline columns shown
};

// One section's table: its columns and their formats (one per column: every byte figure in the
// unit of the section's largest, every rate with one number of decimals).
class SectionTable {
 public:
  SectionTable(const RunReport& r, const std::vector<CaseRow>& rows, const CaseGroup& g) : r_(r), rows_(rows), g_(g) {
    double largest = 0;
    for (std::size_t i : g.cases) {
      const CaseRow& row = rows[i];
      if (!row.s.run) continue;
      largest = std::max(largest, row.s.peak_reserved.max);
      for (const auto& st : row.c.steps) largest = std::max(largest, double(st.peak_reserved_bytes));
    }
    unit_ = byte_unit_for(largest);
    const CaseResult& first = r.cases[g.cases.front()];
    for (const Column& col : case_columns()) {
      if (col.title.empty() || !applies_to(col.applies, first) || !shown_in_tables(col, r)) continue;
      std::vector<double> values;
      bool any = false;
      for (std::size_t i : g.cases) {
        const CellValue v = col.get(rows[i]);
        if (is_empty(v)) continue;
        any = true;
        values.push_back(as_number(v));
        if (col.spread && rows[i].s.run)
          if (auto s = col.spread(rows[i])) values.insert(values.end(), {s->min, s->max});
      }
      if (!any) continue;  // no figure in any row: the column says nothing here
      columns_.push_back({&col, number_column(values)});
    }
  }

  std::string bytes(double v) const { return format_in(v, unit_) + " " + unit_.name; }

  std::string render(Marks& marks) const {
    std::string head = "| allocator |", rule = "|---|";
    for (const auto& [col, format] : columns_) {
      head += fmt::format(" {} |", col->title);
      rule += col->unit == Unit::Text ? "---|" : "---:|";
      if (g_.baseline && col->relative != Relative::None) {
        head += fmt::format(" vs {} |", markdown_escape(row_name(r_.cases[*g_.baseline])));
        rule += "---:|";
      }
    }
    std::string out = head + "\n" + rule + "\n";
    for (std::size_t i : g_.cases) {
      const CaseRow& row = rows_[i];
      out += "| " + markdown_escape(row_name(row.c)) + " |";
      if (!row.s.run) {  // no figures: the error where the first figure would be
        out += " error: " + markdown_escape(row.c.error) + " |";
        for (std::size_t k = 1; k < width(); ++k) out += " |";
        out += "\n";
        continue;
      }
      for (const auto& [col, format] : columns_) {
        out += " " + cell(*col, format, row, marks) + " |";
        if (g_.baseline && col->relative != Relative::None) {
          out += " " + relative_cell(*col, row, marks) + " |";
          (col->relative == Relative::Ratio ? marks.ratio : marks.change) = true;
        }
      }
      out += "\n";
    }
    return out;
  }

 private:
  std::size_t width() const {
    std::size_t n = columns_.size();
    if (g_.baseline)
      for (const auto& c : columns_) n += c.first->relative != Relative::None ? 1 : 0;
    return n;
  }

  std::string cell(const Column& col, const NumberColumn& format, const CaseRow& row, Marks& marks) const {
    const CellValue v = col.get(row);
    if (is_empty(v)) return "–";
    std::string text;
    const std::optional<Spread> spread = col.spread ? col.spread(row) : std::nullopt;
    auto show = [&](auto f) { return spread ? with_spread(as_number(v), *spread, f) : f(as_number(v)); };
    switch (col.unit) {
      case Unit::Bytes: text = show([&](double x) { return bytes(x); }); break;
      case Unit::Fraction:
        text = show([&](double x) { return fmt::format("{:.{}f}%", 100 * x, col.percent_decimals); });
        break;
      case Unit::PerSecond: text = show([&](double x) { return format(x); }); break;
      case Unit::Count:
      case Unit::Flag: text = std::to_string(std::get<std::uint64_t>(v)); break;
      case Unit::Text:
      case Unit::Name: text = markdown_escape(std::get<std::string>(v)); break;
    }
    // The OOM cell's kind is computed, not modeled: only the reserved figures are.
    if (is_modeled(col, row.c) && col.unit != Unit::Text) {
      text += kModeledMark;
      marks.modeled = true;
    }
    if (col.rate && had_oom(row.c)) {
      text += kOomRateMark;
      marks.oom_rate = true;
    }
    return text;
  }

  // The case against the group's baseline: peak reserved as a ratio (x0.93), a rate as a change
  // (+12%). A rate where either ran into an OOM is marked, as the rate itself is.
  std::string relative_cell(const Column& col, const CaseRow& row, Marks& marks) const {
    if (row.index == *g_.baseline) return "baseline";
    const CaseRow& base = rows_[*g_.baseline];
    if (!base.s.run) return "–";
    const double v = as_number(col.get(row)), b = as_number(col.get(base));
    if (b <= 0) return "–";
    std::string text;
    if (col.relative == Relative::Ratio) {
      text = fmt::format("x{:.2f}", v / b);
    } else {
      double change = std::round(100 * (v / b - 1));
      text = fmt::format("{:+.0f}%", change == 0 ? 0.0 : change);
    }
    if (col.rate && (had_oom(row.c) || had_oom(base.c))) {
      text += kOomRateMark;
      marks.oom_rate = true;
    }
    return text;
  }

  const RunReport& r_;
  const std::vector<CaseRow>& rows_;
  const CaseGroup& g_;
  ByteUnit unit_{"MiB", double(MiB), 1};
  std::vector<std::pair<const Column*, NumberColumn>> columns_;
};

// Running peaks at a quarter, half, three quarters and all of the first run's steps:
// "peak reserved (fragmentation)", to show fragmentation growing (or not) over a run.
std::string over_steps_table(const RunReport& r, const CaseGroup& g, const SectionTable& t) {
  std::string out;
  for (std::size_t i : g.cases) {
    const CaseResult& c = r.cases[i];
    if (c.steps.size() < 4) continue;
    if (out.empty())
      out = "\n| allocator | peak reserved (fragmentation) after step: 1/4 | 1/2 | 3/4 | all |\n"
            "|---|---:|---:|---:|---:|\n";
    out += "| " + markdown_escape(row_name(c)) + " |";
    const auto& st = c.steps;
    for (int q = 1; q <= 4; ++q) {
      std::size_t k = (st.size() * q + 3) / 4;
      k = k ? k - 1 : 0;
      const StepSample& x = st[k];
      // Fragmentation at peak reserved so far, as in the main table.
      double frag = x.peak_reserved_sampled_bytes ? 1.0 - double(x.allocated_at_peak_reserved_bytes) /
                                                              double(x.peak_reserved_sampled_bytes)
                                                  : 0;
      out += fmt::format(" {}: {} ({:.1f}%) |", x.step + 1, t.bytes(double(x.peak_reserved_bytes)), 100 * frag);
    }
    out += "\n";
  }
  return out;
}

// One row per case with an OOM: what would fix it first, then every detail of the first OOM and
// the count by kind; then the allocator's own message for each (PyTorch's text for caching).
std::string oom_details_table(const RunReport& r, const CaseGroup& g) {
  std::string out, messages;
  // A trace that records where each request came from adds a column.
  bool origins = false;
  for (std::size_t i : g.cases) {
    const CaseResult& c = r.cases[i];
    origins = origins || (!c.runs.empty() && c.runs.front().first_oom && !c.runs.front().first_oom->origin.empty());
  }
  for (std::size_t i : g.cases) {
    const CaseResult& c = r.cases[i];
    const RunMetrics* m = c.runs.empty() ? nullptr : &c.runs.front();
    if (!m || !m->first_oom) continue;
    if (out.empty())
      out = "\n| first OOM | kind | what would fix it | step | event | request | allocated | reserved | cached "
            "| largest free block | fragmentation at the OOM | capacity left | retried | OOMs: fragmentation / capacity "
            "| block map |" + std::string(origins ? " requested at |" : "") + "\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|" + (origins ? "---|" : "") + "\n";
    const OomRecord& o = *m->first_oom;
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1f}% | {} | {} | {} / {} | {} |{}\n",
                       markdown_escape(row_name(c)), to_string(o.kind), markdown_escape(oom_diagnosis_text(r, i)), o.step,
                       o.event, format_bytes(o.requested_bytes), format_bytes(o.allocated_bytes),
                       format_bytes(o.reserved_bytes), format_bytes(o.cached_bytes), format_bytes(o.largest_free_block),
                       100 * o.fragmentation(), format_bytes(o.capacity_bytes),
                       o.retried_after_freeing_cache ? "yes" : "no", m->fragmentation_ooms, m->capacity_ooms,
                       has_oom_details(c) ? "oom/" + oom_file_stem(i, c) + ".svg" : "",
                       origins ? " " + markdown_escape(o.origin) + " |" : "");
    if (!o.message.empty()) messages += fmt::format("- {}: {}\n", markdown_escape(row_name(c)), markdown_escape(o.message));
  }
  if (!messages.empty()) out += "\nThe allocator's own message at each first OOM:\n\n" + messages;
  return out;
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

}  // namespace

std::string markdown_table(const RunReport& r) {
  std::string capacity = format_bytes(r.device.capacity_bytes);
  if (!r.capacity_sweep.empty()) {
    capacity = "capacity sweep";
    for (std::size_t i = 0; i < r.capacity_sweep.size(); ++i)
      capacity += (i ? ", " : " ") + format_bytes(r.capacity_sweep[i]);
  } else {
    capacity = "capacity " + capacity;
  }
  std::string out = fmt::format("{} on {} ({}, {}), {} run(s) per case\n", r.config_name, r.device.name,
                                to_string(r.device.kind), capacity, r.repeat);
  if (r.shard_count > 1)
    out += fmt::format("Shard {}/{} (from {}): {} of the sweep's {} cases; gpumembench merge joins the shards' "
                       "folders into the whole table.\n",
                       r.shard_index, r.shard_count, r.shard_source, r.cases.size(), r.plan_cases);
  const std::vector<CaseRow> rows = case_rows(r);
  const std::vector<CaseGroup> groups = case_groups(r);
  Marks marks;
  for (const CaseGroup& g : groups) {
    const SectionTable table(r, rows, g);
    out += "\n### " + markdown_escape(g.heading()) + "\n\n";
    out += table.render(marks);
    out += over_steps_table(r, g, table);
    out += oom_details_table(r, g);
  }
  out += capacity_left_note(r);
  std::vector<std::string> notes;
  if (marks.ratio || marks.change)
    notes.push_back(fmt::format("vs {}: each case against {} on the same workload and capacity{}{}.",
                                markdown_escape(r.baseline), markdown_escape(r.baseline),
                                marks.ratio ? "; peak reserved as a ratio (x0.90: 10% less)" : "",
                                marks.change ? "; steps/s as a change (+12%: 12% faster)" : ""));
  if (marks.modeled)
    notes.push_back("(modeled): figure from the simulated device's model of the driver or of the step time, not a measurement.");
  if (marks.oom_rate)
    notes.push_back("(OOM): the rate of the steps run by a case with an OOM (stopped or skipping steps); not comparable.");
  if (std::any_of(r.cases.begin(), r.cases.end(), [](auto& c) { return c.runs.size() > 1; }))
    notes.push_back("Several runs per case: memory figures from the run with the median peak reserved, rates the median "
                    "over the runs; [min–max] where the runs differ.");
  if (!notes.empty()) out += "\n";
  for (const auto& n : notes) out += n + "\n";
  return out;
}

}  // namespace gmb
