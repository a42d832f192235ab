// results.csv: one row per case, every column of the column model (columns.h) in its order,
// raw figures: bytes and counts as integers, fractions 0..1 with six decimals, rates with up
// to six decimals (never an exponent). A case that could not run keeps its row: what it was,
// and the error.
#include "harness/report/csv_report.h"

#include <fmt/format.h>

#include "harness/report/columns.h"
#include "harness/report/table_format.h"

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

std::string csv_cell(const Column& col, const CellValue& v) {
  if (is_empty(v)) return "";
  if (const auto* s = std::get_if<std::string>(&v)) return col.unit == Unit::Name ? *s : csv_quote(*s);
  if (const auto* n = std::get_if<std::uint64_t>(&v)) return std::to_string(*n);
  const double d = std::get<double>(v);
  return col.unit == Unit::PerSecond ? csv_rate(d) : fmt::format("{:.6f}", d);
}

}  // namespace

std::string csv_table(const RunReport& r) {
  std::string out;
  for (const Column& col : case_columns())
    if (col.csv) out += (out.empty() ? "" : ",") + std::string(col.key);
  out += "\n";
  for (const CaseRow& row : case_rows(r)) {
    bool first = true;
    for (const Column& col : case_columns()) {
      if (!col.csv) continue;
      if (!first) out += ',';
      first = false;
      out += csv_cell(col, col.get(row));
    }
    out += "\n";
  }
  return out;
}

}  // namespace gmb
