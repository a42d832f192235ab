// results.tex: a booktabs tabular ready to \input in a paper.
#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "allocators/units.h"
#include "harness/case_summary.h"
#include "harness/report.h"
#include "harness/table_format.h"

namespace gmb {

namespace {

const char* kDagger = "$^\\dagger$";

// "value {\scriptsize[min--max]}" where the runs differ in what is printed.
std::string cell(double value, const Spread& s, const std::function<std::string(double)>& show, bool bold) {
  std::string med = show(value);
  std::string out = bold ? "\\textbf{" + med + "}" : med;
  std::string lo = show(s.min), hi = show(s.max);
  if (lo != hi) out += " {\\scriptsize[" + lo + "--" + hi + "]}";
  return out;
}

// Cells that print the same value are equally best: compare what is printed.
double shown(const std::string& text) { return std::stod(text); }

}  // namespace

std::string latex_table(const RunReport& r) {
  std::vector<CaseSummary> sums;
  for (const auto& c : r.cases) sums.push_back(summarize(c));
  double largest = 0;
  bool tokens = false, modeled = false;
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    if (!sums[i].run) continue;
    largest = std::max(largest, sums[i].peak_reserved.max);
    tokens = tokens || sums[i].tokens_per_s.median > 0;
    modeled = modeled || r.cases[i].memory_modeled || r.cases[i].throughput_modeled;
  }
  const ByteUnit unit = byte_unit_for(largest);
  auto bytes = [&](double v) { return format_in(v, unit); };
  auto percent = [](double v) { return fmt::format("{:.1f}", 100 * v); };
  auto rate = [](double v) { return format_number(v); };

  // Best per column among the cases that ran without an OOM; only where two or more compete.
  std::optional<double> best_reserved, best_frag, best_sps, best_tps;
  std::size_t competing = 0;
  for (const auto& s : sums)
    if (s.run && s.clean) {
      ++competing;
      auto lower = [](std::optional<double>& b, double v) { b = b ? std::min(*b, v) : v; };
      auto higher = [](std::optional<double>& b, double v) { b = b ? std::max(*b, v) : v; };
      lower(best_reserved, shown(bytes(double(s.run->peak_reserved_bytes))));
      lower(best_frag, shown(percent(s.run->fragmentation)));
      higher(best_sps, shown(rate(s.steps_per_s.median)));
      higher(best_tps, shown(rate(s.tokens_per_s.median)));
    }
  auto is_best = [&](const CaseSummary& s, const std::optional<double>& best, const std::string& text) {
    return competing >= 2 && s.clean && best && shown(text) == *best;
  };

  const std::size_t columns = tokens ? 7 : 6;
  std::string out = fmt::format("% gpumembench {}: {} on {} ({})\n", r.tool_version, r.config_name, r.device.name,
                                to_string(r.device.kind));
  if (!r.command_line.empty()) out += "% command: " + r.command_line + "\n";
  out += "% Needs \\usepackage{booktabs}; include with \\input{results.tex}.\n";
  out += fmt::format("\\begin{{tabular}}{{l{}l}}\n\\toprule\n", std::string(columns - 2, 'r'));
  out += fmt::format("Case & Peak reserved ({0}) & Peak allocated ({0}) & Fragmentation (\\%) & Steps/s", unit.name);
  if (tokens) out += " & Tokens/s";
  out += " & OOM \\\\\n\\midrule\n";
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    const CaseResult& c = r.cases[i];
    const CaseSummary& s = sums[i];
    if (!s.run) {
      out += fmt::format("{} & \\multicolumn{{{}}}{{l}}{{error: {}}} \\\\\n", latex_escape(c.label), columns - 1,
                         latex_escape(c.error));
      continue;
    }
    const std::string mm = c.memory_modeled ? kDagger : "";
    const std::string tm = c.throughput_modeled ? kDagger : "";
    out += latex_escape(c.label);
    // Memory figures of the run with the median peak reserved (they belong together); rates: medians.
    const RunMetrics& m = *s.run;
    const double reserved = double(m.peak_reserved_bytes);
    out += " & " + cell(reserved, s.peak_reserved, bytes, is_best(s, best_reserved, bytes(reserved))) + mm;
    out += " & " + cell(double(m.peak_allocated_bytes), s.peak_allocated, bytes, false);
    out += " & " + cell(m.fragmentation, s.fragmentation, percent, is_best(s, best_frag, percent(m.fragmentation))) + mm;
    const double sps = s.steps_per_s.median, tps = s.tokens_per_s.median;
    out += " & " + cell(sps, s.steps_per_s, rate, is_best(s, best_sps, rate(sps))) + tm;
    if (tokens) out += " & " + cell(tps, s.tokens_per_s, rate, is_best(s, best_tps, rate(tps))) + tm;
    std::string oom = "none";
    if (m.first_oom) {
      oom = fmt::format("{}, step {}", to_string(m.first_oom->kind), m.first_oom->step);
      if (m.ooms > 1) oom += fmt::format(" ({} OOMs)", m.ooms);
      oom = latex_escape(oom) + mm;
    }
    if (!c.error.empty()) oom += " (error: " + latex_escape(c.error) + ")";
    out += " & " + oom + " \\\\\n";
  }
  out += "\\bottomrule\n";
  std::set<std::size_t> counts;
  for (const auto& s : sums)
    if (s.run) counts.insert(s.runs);
  std::string runs = counts.size() == 1 ? fmt::format("{} run{} per case", *counts.begin(),
                                                      *counts.begin() == 1 ? "" : "s")
                                        : "Runs per case differ";
  if (counts.empty()) runs = "No runs";
  std::string device = fmt::format("{} ({})", r.device.name, to_string(r.device.kind));
  if (r.device.capacity_bytes) device += ", capacity " + format_bytes(r.device.capacity_bytes);
  auto note = [&](const std::string& text) {
    out += fmt::format("\\multicolumn{{{}}}{{l}}{{\\footnotesize {}}} \\\\\n", columns, text);
  };
  const std::size_t most = counts.empty() ? 0 : *counts.rbegin();
  // Short note lines: a multicolumn wider than the table would widen it.
  note(latex_escape(device) + "; " + latex_escape(runs) + ".");
  if (most > 1) note("Memory: the run with the median peak reserved; rates: the median; [min--max] where runs differ.");
  if (competing >= 2) note("Bold: the best value per column among cases without an OOM.");
  if (modeled) note(std::string(kDagger) + " modeled (simulated device), not measured.");
  out += "\\end{tabular}\n";
  return out;
}

}  // namespace gmb
