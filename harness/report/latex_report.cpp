// results.tex: a booktabs table ready to \input in a paper. It is a tabularx as wide as the
// line (\linewidth: the text width in a one-column article, the whole page in a two-column
// paper's table*); the allocator and OOM columns wrap, the number columns do not. What is the
// same for every row (workload, capacity, device, runs) is said once, under the table.
#include "harness/report/latex_report.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "common/units.h"
#include "harness/report/case_summary.h"
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
std::string cell(double value, const Spread& s, const std::function<std::string(double)>& show, bool bold,
                 const std::string& mark) {
  std::string med = show(value);
  std::string out = (bold ? "\\textbf{" + med + "}" : med) + mark;
  std::string lo = show(s.min), hi = show(s.max);
  if (lo != hi) out = "\\begin{tabular}[t]{@{}r@{}}" + out + "\\\\{\\scriptsize[" + lo + "--" + hi + "]}\\end{tabular}";
  return out;
}

// Rows that may be ranked against each other: the same workload at the same capacity.
std::string group_key(const CaseResult& c) {
  return c.workload_label + "\n" + std::to_string(c.capacity_requested_bytes ? c.capacity_requested_bytes : c.capacity_bytes);
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

std::string latex_table(const RunReport& r) {
  std::vector<CaseSummary> sums;
  for (const auto& c : r.cases) sums.push_back(summarize(c));

  // What varies between rows decides the layout: a capacity column, workload group headings.
  std::set<std::string> workloads;
  std::set<Bytes> capacities;
  double largest = 0;
  bool tokens = false, modeled = false, oom_rate = false;
  std::vector<double> sps_values, tps_values;
  std::set<std::string> workloads_with_tokens;
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const CaseResult& c = r.cases[i];
    workloads.insert(c.workload_label);
    capacities.insert(c.capacity_bytes);
    if (!sums[i].run) continue;
    largest = std::max(largest, sums[i].peak_reserved.max);
    if (sums[i].tokens_per_s.max > 0) workloads_with_tokens.insert(c.workload_label);
    modeled = modeled || c.memory_modeled || c.throughput_modeled;
    oom_rate = oom_rate || !sums[i].clean;
    for (double v : {sums[i].steps_per_s.median, sums[i].steps_per_s.min, sums[i].steps_per_s.max}) sps_values.push_back(v);
    for (double v : {sums[i].tokens_per_s.median, sums[i].tokens_per_s.min, sums[i].tokens_per_s.max})
      tps_values.push_back(v);
  }
  tokens = !workloads_with_tokens.empty();
  const bool capacity_column = capacities.size() > 1;
  const bool workload_groups = workloads.size() > 1;
  const ByteUnit unit = byte_unit_for(largest);
  // Capacities are round sizes: GiB with two decimals from 1 GiB on (1.75), else MiB.
  const ByteUnit cap_unit = !capacities.empty() && *capacities.begin() >= GiB ? ByteUnit{"GiB", double(GiB), 2}
                                                                               : ByteUnit{"MiB", double(MiB), 0};
  auto bytes = [&](double v) { return format_in(v, unit); };
  auto percent = [](double v) { return fmt::format("{:.1f}", 100 * v); };
  const NumberColumn sps_format = number_column(sps_values), tps_format = number_column(tps_values);
  auto sps_text = [&](double v) { return sps_format(v); };
  auto tps_text = [&](double v) { return tps_format(v); };

  BestOf best_reserved(true), best_frag(true), best_sps(false), best_tps(false);
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const CaseSummary& s = sums[i];
    if (!s.run || !s.clean) continue;
    const CaseResult& c = r.cases[i];
    const std::string g = group_key(c);
    best_reserved.add(g, bytes(double(s.run->peak_reserved_bytes)), c.memory_modeled);
    best_frag.add(g, percent(s.run->fragmentation), c.memory_modeled);
    best_sps.add(g, sps_text(s.steps_per_s.median), c.throughput_modeled);
    if (workloads_with_tokens.count(c.workload_label)) best_tps.add(g, tps_text(s.tokens_per_s.median), c.throughput_modeled);
  }

  // Columns: allocator, [capacity], reserved, allocated, fragmentation, steps/s, [tokens/s], OOM.
  const std::size_t numbers = 4 + (capacity_column ? 1 : 0) + (tokens ? 1 : 0);
  const std::size_t columns = numbers + 2;  // with the allocator and the OOM
  std::string out = fmt::format("% gpumembench {}: {} on {} ({})\n", r.tool_version, r.config_name, r.device.name,
                                to_string(r.device.kind));
  if (!r.command_line.empty()) out += "% command: " + r.command_line + "\n";
  out += "% Needs \\usepackage{booktabs,tabularx}. As wide as the line: \\input{results.tex} in a table\n"
         "% (one-column paper) or table* (two-column paper), with your \\caption.\n";
  // The allocator column takes the width the others leave, and wraps; the OOM column wraps at
  // 6.5em where any case has an OOM ("none" everywhere needs no more than its word). Columns
  // 4pt apart (LaTeX's default is 6pt): a one-column article's text is only 345pt wide.
  const bool any_oom = std::any_of(r.cases.begin(), r.cases.end(), [](const CaseResult& c) {
    return !c.error.empty() || std::any_of(c.runs.begin(), c.runs.end(), [](auto& m) { return m.first_oom.has_value(); });
  });
  out += "{\\setlength{\\tabcolsep}{4pt}%\n";
  out += fmt::format("\\begin{{tabularx}}{{\\linewidth}}{{@{{}}>{{\\raggedright\\arraybackslash}}X{}{}@{{}}}}\n\\toprule\n",
                     std::string(numbers, 'r'), any_oom ? ">{\\raggedright\\arraybackslash}p{6.5em}" : "l");
  // Two header lines keep the number columns narrow.
  const std::size_t reserved_col = capacity_column ? 3 : 2;
  std::string top = capacity_column ? " & Cap." : "";
  std::string bottom = capacity_column ? fmt::format(" & ({})", cap_unit.name) : "";
  out += fmt::format(" {} & \\multicolumn{{2}}{{c}}{{Peak ({})}} & Frag. & Steps{} & \\\\\n", top, unit.name,
                     tokens ? " & Tokens" : "");
  out += fmt::format("\\cmidrule(lr){{{}-{}}}\n", reserved_col, reserved_col + 1);
  out += fmt::format("Allocator{} & reserved & allocated & (\\%) & /s{} & First OOM \\\\\n", bottom,
                     tokens ? " & /s" : "");

  std::string current_group;
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const CaseResult& c = r.cases[i];
    const CaseSummary& s = sums[i];
    if (i == 0 || (workload_groups && c.workload_label != r.cases[i - 1].workload_label)) {
      out += "\\midrule\n";
      if (workload_groups)
        out += fmt::format("\\multicolumn{{{}}}{{@{{}}>{{\\raggedright\\arraybackslash}}p{{\\linewidth}}@{{}}}}"
                           "{{\\emph{{{}}}}} \\\\\n",
                           columns, latex_label(c.workload_label));
    }
    out += latex_label(c.allocator_label.empty() ? c.label : c.allocator_label);
    if (capacity_column) out += " & " + format_in(double(c.capacity_bytes), cap_unit);
    if (!s.run) {  // no figures: dashes, and the error where the OOM would be (that column wraps)
      for (std::size_t k = capacity_column ? 1 : 0; k < numbers; ++k) out += " & --";
      out += " & error: " + latex_escape(c.error) + " \\\\\n";
      continue;
    }
    const std::string g = group_key(c);
    const std::string mm = marks(c.memory_modeled, false);
    // Memory figures of the run with the median peak reserved (they belong together); rates: medians.
    const RunMetrics& m = *s.run;
    const std::string reserved = bytes(double(m.peak_reserved_bytes));
    out += " & " + cell(double(m.peak_reserved_bytes), s.peak_reserved, bytes,
                        s.clean && best_reserved.is_best(g, reserved, c.memory_modeled), mm);
    out += " & " + cell(double(m.peak_allocated_bytes), s.peak_allocated, bytes, false, "");
    out += " & " + cell(m.fragmentation, s.fragmentation, percent,
                        s.clean && best_frag.is_best(g, percent(m.fragmentation), c.memory_modeled), mm);
    // A case with an OOM: the rate of what it did, marked, never bold.
    const std::string rate_mark = marks(c.throughput_modeled, !s.clean);
    const double sps = s.steps_per_s.median, tps = s.tokens_per_s.median;
    out += " & " + cell(sps, s.steps_per_s, sps_text, s.clean && best_sps.is_best(g, sps_text(sps), c.throughput_modeled),
                        rate_mark);
    if (tokens) {
      if (workloads_with_tokens.count(c.workload_label))
        out += " & " + cell(tps, s.tokens_per_s, tps_text,
                            s.clean && best_tps.is_best(g, tps_text(tps), c.throughput_modeled), rate_mark);
      else
        out += " & --";
    }
    std::string oom = "none";
    if (m.first_oom) {
      oom = fmt::format("{}, step {}", to_string(m.first_oom->kind), m.first_oom->step);
      if (m.ooms > 1) oom += fmt::format("; {} OOMs", m.ooms);
      oom = latex_escape(oom) + mm;
    }
    if (!c.error.empty()) oom += " (error: " + latex_escape(c.error) + ")";
    out += " & " + oom + " \\\\\n";
  }
  out += "\\bottomrule\n\\end{tabularx}}\n";

  // The caption footer: what every row shares, then what the marks mean.
  std::set<std::size_t> counts;
  for (const auto& s : sums)
    if (s.run) counts.insert(s.runs);
  std::string runs = counts.size() == 1 ? fmt::format("{} run{} per case", *counts.begin(),
                                                      *counts.begin() == 1 ? "" : "s")
                                        : "runs per case differ";
  if (counts.empty()) runs = "no runs";
  std::vector<std::string> notes;
  if (!workload_groups && !r.cases.empty()) notes.push_back("Workload: " + latex_label(r.cases.front().workload_label) + ".");
  std::string device = "Device: " + latex_escape(fmt::format("{} ({})", r.device.name, to_string(r.device.kind)));
  if (capacity_column) {
    std::string list;
    for (Bytes b : capacities) list += (list.empty() ? "" : ", ") + format_bytes(b);
    device += "; capacity per row (" + latex_escape(list) + ")";
  } else if (!capacities.empty()) {
    const Bytes cap = *capacities.begin() ? *capacities.begin() : r.device.capacity_bytes;
    if (cap) device += "; capacity " + latex_escape(format_bytes(cap));
  }
  notes.push_back(device + "; " + runs + ".");
  const std::size_t most = counts.empty() ? 0 : *counts.rbegin();
  if (most > 1) notes.push_back("Memory: the run with the median peak reserved; rates: the median; [min--max] where runs differ.");
  const bool any_bold = best_reserved.any() || best_frag.any() || best_sps.any() || best_tps.any();
  if (any_bold) {
    std::string scope = workload_groups || capacity_column ? "per column, workload and capacity" : "per column";
    std::string b = "Bold: the best " + scope + " among cases without an OOM";
    if (best_reserved.mixed() || best_frag.mixed() || best_sps.mixed() || best_tps.mixed())
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
