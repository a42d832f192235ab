// results.tex: a booktabs table ready to \input in a paper. It is a tabularx as wide as the
// line (\linewidth: the text width in a one-column article, the whole page in a two-column
// paper's table*); the allocator and OOM columns wrap, the number columns do not. What is the
// same for every row (workload, capacity, device, runs) is said once, under the table; rows of
// several workloads or capacities come in groups under a heading that names both. The number
// columns are those of the column model (columns.h) with a LaTeX heading that mean something
// for at least one workload of the table.
#include "harness/report/latex_report.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/units.h"
#include "harness/report/case_summary.h"
#include "harness/report/columns.h"
#include "harness/report/table_format.h"

namespace gmb {

namespace {

const char* kDagger = "$^\\dagger$";    // modeled, not measured
const char* kDdagger = "$^\\ddagger$";  // the rate of a case stopped or slowed by an OOM

// The marks of a cell as one superscript: $^{\dagger\ddagger}$.
std::string marks(bool modeled, bool oom) {
  if (!modeled && !oom) return "";
  return std::string("$^{") + (modeled ? "\\dagger" : "") + (oom ? "\\ddagger" : "") + "}$";
}

// "value" or, where the runs differ in what is printed, the value over a small [min--max]:
// a nested tabular keeps the number column narrow.
// Under it, where there is a baseline, the case against it (a column of its own would not fit
// the page).
std::string cell(double value, const Spread& s, const std::function<std::string(double)>& show, bool bold,
                 const std::string& mark, const std::string& relative = "") {
  std::string med = show(value);
  std::string out = (bold ? "\\textbf{" + med + "}" : med) + mark;
  std::string lo = show(s.min), hi = show(s.max);
  std::string below;
  if (lo != hi) below += "\\\\{\\scriptsize[" + lo + "--" + hi + "]}";
  if (!relative.empty()) below += "\\\\{\\scriptsize " + relative + "}";
  if (!below.empty()) out = "\\begin{tabular}[t]{@{}r@{}}" + out + below + "\\end{tabular}";
  return out;
}

// The best printed value of one column in each group, among the cases that ran every repeat
// without an OOM, and among those only the figures of one provenance: where some are measured
// or computed and others modeled, only the former compete (a model's figure is not a rival to a
// measurement). Cells printing the same text are equally best. Bold only where two or more compete.
class BestOf {
 public:
  BestOf(bool lower_is_better) : lower_(lower_is_better) {}
  void add(const std::string& group, const std::string& text, bool modeled) {
    auto& g = groups_[group];
    (modeled ? g.modeled : g.exact).push_back(std::stod(text));
  }
  bool is_best(const std::string& group, const std::string& text, bool modeled) const {
    auto it = groups_.find(group);
    if (it == groups_.end()) return false;
    const auto& pool = it->second.exact.empty() ? it->second.modeled : it->second.exact;
    if (pool.size() < 2 || (modeled && !it->second.exact.empty())) return false;
    const double best = lower_ ? *std::min_element(pool.begin(), pool.end()) : *std::max_element(pool.begin(), pool.end());
    return std::stod(text) == best;
  }
  bool mixed() const {
    return std::any_of(groups_.begin(), groups_.end(), [](auto& g) { return !g.second.exact.empty() && !g.second.modeled.empty(); });
  }
  bool any() const {
    return std::any_of(groups_.begin(), groups_.end(), [](auto& g) {
      return std::max(g.second.exact.size(), g.second.modeled.size()) >= 2;
    });
  }

 private:
  struct Pools {
    std::vector<double> exact, modeled;
  };
  bool lower_;
  std::map<std::string, Pools> groups_;
};

}  // namespace

namespace {

// One number column of the table: a column of the model with its two heading lines.
struct TexColumn {
  const Column* col;
  std::string top, bottom;
};

// The case against the group's baseline, under its figure: $\times$0.93 (a ratio) or +12\%.
std::string relative_text(const Column& col, double v, double base) {
  if (base <= 0) return "--";
  if (col.relative == Relative::Ratio) return fmt::format("$\\times${:.2f}", v / base);
  double change = std::round(100 * (v / base - 1));
  return fmt::format("{:+.0f}\\%", change == 0 ? 0.0 : change);
}

}  // namespace

std::string latex_table(const RunReport& r) {
  const std::vector<CaseRow> rows = case_rows(r);
  const std::vector<CaseGroup> groups = case_groups(r);
  const bool grouped = groups.size() > 1;

  double largest = 0;
  for (const CaseRow& row : rows)
    if (row.s.run) largest = std::max(largest, row.s.peak_reserved.max);
  // The footer explains the marks that were printed.
  bool modeled = false, oom_rate = false;
  auto mark = [&](bool model, bool oom) {
    modeled = modeled || model;
    oom_rate = oom_rate || oom;
    return marks(model, oom);
  };
  const ByteUnit unit = byte_unit_for(largest);
  auto bytes = [&](double v) { return format_in(v, unit); };
  auto percent = [](double v) { return fmt::format("{:.1f}", 100 * v); };

  // The columns: those with a LaTeX heading that apply to a workload of the table.
  bool baseline = false;  // a figure was shown against the baseline
  std::vector<TexColumn> columns;
  for (const Column& col : case_columns()) {
    if (col.latex_top.empty() || !shown_in_tables(col, r)) continue;
    if (!std::any_of(rows.begin(), rows.end(), [&](const CaseRow& row) { return applies_to(col.applies, row.c); })) continue;
    std::string top(col.latex_top);
    if (col.unit == Unit::Bytes) top += fmt::format(" ({})", unit.name);
    columns.push_back({&col, top, std::string(col.latex_bottom)});
  }

  // One format per rate column over the whole table.
  std::map<const Column*, NumberColumn> rate_format;
  for (const TexColumn& t : columns) {
    if (t.col->unit != Unit::PerSecond) continue;
    std::vector<double> values;
    for (const CaseRow& row : rows)
      if (row.s.run && t.col->spread)
        if (auto sp = t.col->spread(row)) values.insert(values.end(), {sp->median, sp->min, sp->max});
    rate_format[t.col] = number_column(values);
  }
  auto show = [&](const Column& col) -> std::function<std::string(double)> {
    switch (col.unit) {
      case Unit::Bytes: return bytes;
      case Unit::Fraction: return percent;
      default: {
        const NumberColumn f = rate_format[&col];
        return [f](double v) { return f(v); };
      }
    }
  };

  // Bold: the best printed figure of a column within each group, among the cases without an OOM.
  std::map<const Column*, BestOf> best;
  for (const TexColumn& t : columns) {
    if (t.col->better == Better::None) continue;
    BestOf& b = best.emplace(t.col, BestOf(t.col->better == Better::Lower)).first->second;
    for (std::size_t gi = 0; gi < groups.size(); ++gi)
      for (std::size_t i : groups[gi].cases) {
        const CaseRow& row = rows[i];
        if (!row.s.run || !row.s.clean || !applies_to(t.col->applies, row.c)) continue;
        b.add(std::to_string(gi), show(*t.col)(as_number(t.col->get(row))), is_modeled(*t.col, row.c));
      }
  }

  std::string out = fmt::format("% gpumembench {}: {} on {} ({})\n", r.tool_version, r.config_name, r.device.name,
                                to_string(r.device.kind));
  if (!r.command_line.empty()) out += "% command: " + r.command_line + "\n";
  if (r.shard_count > 1)
    out += fmt::format("% shard {}/{}: {} of the sweep's {} cases (gpumembench merge joins the shards)\n", r.shard_index,
                       r.shard_count, r.cases.size(), r.plan_cases);
  out += "% Needs \\usepackage{booktabs,tabularx}. As wide as the line: \\input{results.tex} in a table\n"
         "% (one-column paper) or table* (two-column paper), with your \\caption.\n";
  // The allocator column takes the width the others leave, and wraps; the OOM column wraps at
  // 6.5em where any case has an OOM ("none" everywhere needs no more than its word). Columns
  // 4pt apart (LaTeX's default is 6pt): a one-column article's text is only 345pt wide.
  const bool any_oom = std::any_of(r.cases.begin(), r.cases.end(), [](const CaseResult& c) {
    return !c.error.empty() || std::any_of(c.runs.begin(), c.runs.end(), [](auto& m) { return m.first_oom.has_value(); });
  });
  // One tabularx: the allocator, `columns`, and (the first table) the first OOM. A table wider
  // than the line cannot be read in a paper, so the published fragmentation metrics (--metrics)
  // go in tables of their own under the main one, whole families, at most kMetricColumnsPerTable columns each.
  auto table = [&](const std::vector<TexColumn>& columns, bool with_oom) {
    const std::size_t numbers = columns.size();
    const std::size_t width = numbers + (with_oom ? 2 : 1);  // with the allocator (and the OOM)
    out += "{\\setlength{\\tabcolsep}{4pt}%\n";
    out += fmt::format("\\begin{{tabularx}}{{\\linewidth}}{{@{{}}>{{\\raggedright\\arraybackslash}}X{}{}@{{}}}}\n\\toprule\n",
                       std::string(numbers, 'r'), !with_oom ? "" : any_oom ? ">{\\raggedright\\arraybackslash}p{6.5em}" : "l");
    // Two header lines keep the number columns narrow; neighbours with the same top line share it.
    std::string top = " ", rules, bottom = "Allocator";
    for (std::size_t k = 0; k < numbers;) {
      std::size_t n = 1;
      while (k + n < numbers && columns[k + n].top == columns[k].top) ++n;
      if (n > 1) {
        top += fmt::format(" & \\multicolumn{{{}}}{{c}}{{{}}}", n, columns[k].top);
        rules += fmt::format("\\cmidrule(lr){{{}-{}}}\n", k + 2, k + n + 1);
      } else {
        top += " & " + columns[k].top;
      }
      for (std::size_t j = k; j < k + n; ++j) bottom += " & " + columns[j].bottom;
      k += n;
    }
    out += top + (with_oom ? " & " : "") + "\\\\\n" + rules + bottom + (with_oom ? " & First OOM" : "") + " \\\\\n";

    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const CaseGroup& g = groups[gi];
      out += "\\midrule\n";
      if (grouped)
        out += fmt::format("\\multicolumn{{{}}}{{@{{}}>{{\\raggedright\\arraybackslash}}p{{\\linewidth}}@{{}}}}"
                           "{{\\emph{{{}}}}} \\\\\n",
                           width, latex_label(g.heading()));
      for (std::size_t i : g.cases) {
        const CaseRow& row = rows[i];
        const CaseResult& c = row.c;
        const CaseSummary& s = row.s;
        out += latex_label(row_name(c));
        if (!s.run) {  // no figures: dashes, and the error where the OOM would be (that column wraps)
          for (std::size_t k = 0; k < numbers; ++k) out += " & --";
          out += (with_oom ? " & error: " + latex_escape(c.error) : std::string()) + " \\\\\n";
          continue;
        }
        const std::string gkey = std::to_string(gi);
        for (const TexColumn& t : columns) {
          const Column& col = *t.col;
          if (!applies_to(col.applies, c)) {
            out += " & --";
            continue;
          }
          std::string relative;
          if (g.baseline && col.relative != Relative::None) {
            baseline = true;
            const CaseRow& base = rows[*g.baseline];
            if (i == *g.baseline) relative = "base";
            else if (base.s.run) relative = relative_text(col, as_number(col.get(row)), as_number(col.get(base)));
            if (col.rate && i != *g.baseline && (!s.clean || !base.s.clean)) relative += mark(false, true);
          }
          const double v = as_number(col.get(row));
          const bool model = is_modeled(col, c);
          // A case with an OOM: the rate of what it did, marked, never bold.
          const std::string marked = mark(model, col.rate && !s.clean);
          auto it = best.find(&col);
          const bool bold = s.clean && it != best.end() && it->second.is_best(gkey, show(col)(v), model);
          const std::optional<Spread> sp = col.spread ? col.spread(row) : std::nullopt;
          out += " & " + cell(v, sp.value_or(Spread{v, v, v}), show(col), bold, marked, relative);
        }
        if (!with_oom) {
          out += " \\\\\n";
          continue;
        }
        const RunMetrics& m = *s.run;
        std::string oom = "none";
        if (m.first_oom) {
          oom = fmt::format("{}, step {}", to_string(m.first_oom->kind), m.first_oom->step);
          if (m.ooms > 1) oom += fmt::format("; {} OOMs", m.ooms);
          oom = latex_escape(oom) + mark(c.memory_modeled, false);
        }
        if (!c.error.empty()) oom += " (error: " + latex_escape(c.error) + ")";
        out += " & " + oom + " \\\\\n";
      }
    }
    out += "\\bottomrule\n\\end{tabularx}}\n";
  };
  std::vector<TexColumn> main_columns, metric_columns;
  for (const TexColumn& t : columns) (t.col->metric_family.empty() ? main_columns : metric_columns).push_back(t);
  table(main_columns, true);
  // Whole families per table (a family's columns share a heading), packed in order.
  constexpr std::size_t kMetricColumnsPerTable = 4;
  std::vector<std::vector<TexColumn>> metric_tables;
  for (std::size_t k = 0; k < metric_columns.size();) {
    std::size_t n = 1;
    while (k + n < metric_columns.size() && metric_columns[k + n].col->metric_family == metric_columns[k].col->metric_family) ++n;
    if (metric_tables.empty() || metric_tables.back().size() + n > kMetricColumnsPerTable) metric_tables.emplace_back();
    metric_tables.back().insert(metric_tables.back().end(), metric_columns.begin() + std::ptrdiff_t(k),
                                metric_columns.begin() + std::ptrdiff_t(k + n));
    k += n;
  }
  for (const auto& t : metric_tables) {
    out += "\\par\\medskip\n";
    table(t, false);
  }

  // The caption footer: what every row shares, then what the marks mean.
  std::set<std::size_t> counts;
  for (const auto& row : rows)
    if (row.s.run) counts.insert(row.s.runs);
  std::string runs = counts.size() == 1 ? fmt::format("{} run{} per case", *counts.begin(),
                                                      *counts.begin() == 1 ? "" : "s")
                                        : "runs per case differ";
  if (counts.empty()) runs = "no runs";
  std::vector<std::string> notes;
  if (!grouped && !groups.empty()) notes.push_back("Workload: " + latex_label(groups.front().workload_label) + ".");
  std::string device = "Device: " + latex_escape(fmt::format("{} ({})", r.device.name, to_string(r.device.kind)));
  if (grouped) {
    device += "; capacity in each group's heading";
  } else if (!groups.empty()) {
    const Bytes cap = groups.front().capacity_bytes ? groups.front().capacity_bytes : r.device.capacity_bytes;
    if (cap) device += "; capacity " + latex_escape(format_bytes(cap));
  }
  notes.push_back(device + "; " + runs + ".");
  const std::size_t most = counts.empty() ? 0 : *counts.rbegin();
  if (most > 1) notes.push_back("Memory: the run with the median peak reserved; rates: the median; [min--max] where runs differ.");
  if (baseline)
    notes.push_back("Under a figure: the case against " + latex_label(r.baseline) +
                    " on the same workload and capacity, peak reserved as a ratio ($\\times$), rates as a change (\\%).");
  const bool any_bold = std::any_of(best.begin(), best.end(), [](auto& b) { return b.second.any(); });
  if (any_bold) {
    std::string scope = grouped ? "per column, workload and capacity" : "per column";
    std::string b = "Bold: the best " + scope + " among cases without an OOM";
    if (std::any_of(best.begin(), best.end(), [](auto& x) { return x.second.mixed(); }))
      b += "; modeled figures are not ranked against computed or measured ones";
    notes.push_back(b + ".");
  }
  if (oom_rate) notes.push_back(std::string(kDdagger) + " rate of the steps run by a case with an OOM; not comparable.");
  if (modeled) notes.push_back(std::string(kDagger) + " modeled (simulated device), not measured.");
  out += "\\par\\smallskip\n{\\footnotesize\\raggedright\n";
  for (const auto& n : notes) out += n + "\n";
  out += "\\par}\n";
  return out;
}

}  // namespace gmb
