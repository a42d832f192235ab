// The figures of a case, one column each: the one list that results.csv, results.md and
// results.tex draw from. A column says what it is (key, heading, unit), how to read it from a
// case (getter, spread over the repeats), which workloads it means something for, where its
// figure may be modeled, and which way is better. The CSV writes every column in this order
// (stable for scripts); the Markdown and LaTeX tables pick the columns that have a heading and
// mean something for the rows they show.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "harness/report/case_summary.h"
#include "harness/run/results.h"

namespace gmb {

// One case of a report as the columns read it.
struct CaseRow {
  const RunReport& report;
  std::size_t index;
  const CaseResult& c;
  CaseSummary s;  // s.run is null when the case could not run
};
std::vector<CaseRow> case_rows(const RunReport& report);

enum class Unit {
  Text,       // words (CSV: quoted)
  Name,       // an identifier (CSV: as is)
  Count,      // an integer count (steps, events, calls)
  Bytes,      // an integer byte count
  Fraction,   // 0..1 (CSV: six decimals; tables: a percentage)
  PerSecond,  // a rate (CSV: up to six decimals, no exponent)
  Flag,       // 0/1
};

// The workloads a column means something for. Steps: a workload whose steps are training or
// inference steps (a transformer); a hole pattern's repeats and a trace's chunks of events are
// not, so their steps/s says nothing. Tokens: a workload that counts tokens (a transformer).
enum class Applies { Every, Steps, Tokens };
bool applies_to(Applies applies, const CaseResult& c);

// Where the figure can come from a model on sim: the device's memory model (native
// allocators) or the modeled step time.
enum class Provenance { Exact, Memory, Throughput };

enum class Better { None, Lower, Higher };

// With a baseline (--baseline NAME), the tables add after the column each case relative to
// the baseline case of its group: a ratio (x0.93) or a change (+12%).
enum class Relative { None, Ratio, Change };

using CellValue = std::variant<std::monostate, std::uint64_t, double, std::string>;

struct Column {
  std::string_view key;    // the CSV header: unit in the name (_bytes, _per_s; fractions are 0..1)
  std::string_view title;  // the Markdown heading; empty: CSV only
  Unit unit;
  CellValue (*get)(const CaseRow&);                   // empty (monostate) where there is no figure
  std::optional<Spread> (*spread)(const CaseRow&) = nullptr;  // over the repeats, where the tables show one
  Applies applies = Applies::Every;
  Provenance provenance = Provenance::Exact;
  Better better = Better::None;
  int percent_decimals = 1;  // Fraction in the tables
  bool rate = false;         // a rate: an OOM case's figure is that of the steps it ran (marked)
  Relative relative = Relative::None;
  std::string_view latex_top = {}, latex_bottom = {};  // LaTeX's two heading lines (a byte unit follows the top)
  bool csv = true;  // false: a table cell made of CSV columns (the OOM in words)
  // A published fragmentation metric other than gpumembench's own (docs/METRICS.md): in the
  // CSV and JSON always, in the Markdown and LaTeX tables only where the report asks for its
  // family (`output: {metrics: [...]}`, --metrics). Empty: a column the tables always consider.
  std::string_view metric_family = {};
};

// Whether the tables of this report show the column (its family asked for, or none).
bool shown_in_tables(const Column& col, const RunReport& report);

// Every column, in the CSV's order.
const std::vector<Column>& case_columns();
// The column of that key (an internal error if there is none).
const Column& column(std::string_view key);

// A cell as a double (0 where empty), for ranking and ratios.
double as_number(const CellValue& v);
bool is_empty(const CellValue& v);

// Whether the column's figure for this case comes from a model.
bool is_modeled(const Column& col, const CaseResult& c);

// A case with an OOM in any run: its rates are those of the steps it ran.
bool had_oom(const CaseResult& c);

// Rows that belong together in a table: the same workload at the same capacity, in report
// order. The heading names the workload once with its capacity ("... @ 1.75 GiB").
struct CaseGroup {
  std::string workload_label;
  Bytes capacity_bytes = 0;  // as configured (on a GPU the ballast may leave a little more or less)
  std::vector<std::size_t> cases;
  std::optional<std::size_t> baseline;  // the baseline case of this group, when one is chosen and present
  std::string heading() const;
};
Bytes group_capacity(const CaseResult& c);
std::vector<CaseGroup> case_groups(const RunReport& report);

// The case of a group that --baseline NAME names: its allocator label, or the allocator's name
// when exactly one case of the group has it.
std::optional<std::size_t> find_baseline(const RunReport& report, const std::vector<std::size_t>& cases,
                                         const std::string& name);

// The row name inside a group: the allocator's label (the workload is the group's heading).
std::string row_name(const CaseResult& c);

}  // namespace gmb
