// Small helpers shared by the report and compare tables: escaping for Markdown, CSV and LaTeX,
// numbers without exponents, and the byte unit of a LaTeX column.
#pragma once

#include <string>
#include <string_view>

#include "allocators/device.h"

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

// The unit of a byte column in LaTeX: MiB below 10 GiB, GiB from there.
struct ByteUnit {
  const char* name;
  double bytes;
  int decimals;
};
ByteUnit byte_unit_for(double largest_bytes);
std::string format_in(double bytes, const ByteUnit& unit);

}  // namespace gmb
