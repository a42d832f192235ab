// Small helpers shared by the report and compare tables: escaping for Markdown, CSV and LaTeX,
// numbers without exponents, and the byte unit of a LaTeX column.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "devices/device.h"

namespace gmb {

// A label safe inside a Markdown table cell: `|` escaped, newlines as spaces.
std::string markdown_escape(std::string_view text);
// A CSV field, always quoted ("" for a quote inside).
std::string csv_quote(std::string_view text);
// Text safe in LaTeX (text mode): \ { } $ & # ^ _ ~ % < > | escaped, the en dash as --.
std::string latex_escape(std::string_view text);

// About `significant` significant digits in fixed notation (no exponent; papers and terminals
// read "185185" better than "1.852e+05"); values below 1e-3 keep three significant digits.
std::string format_number(double value, int significant = 4);

// A LaTeX row or group label: latex_escape, then " x " (a product) as $\times$, and a break
// allowed after , : / = [ (and _ inside [options]) so that a long allocator or workload label wraps in a narrow column.
std::string latex_label(std::string_view text);

// One fixed-point format for every value of a column, so that a column never mixes "599" with
// "599.0" or an exponent with plain digits: as many decimals as the largest value needs for
// `significant` significant digits, more (up to 3) where the smallest nonzero value would
// otherwise show fewer than two.
struct NumberColumn {
  int decimals = 0;
  std::string operator()(double value) const;
};
NumberColumn number_column(const std::vector<double>& values, int significant = 4);

// The unit of a byte column: MiB below 10 GiB, GiB from there.
struct ByteUnit {
  const char* name;
  double bytes;
  int decimals;
};
ByteUnit byte_unit_for(double largest_bytes);
std::string format_in(double bytes, const ByteUnit& unit);

}  // namespace gmb
