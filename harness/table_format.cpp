#include "harness/table_format.h"

#include <cmath>

#include <fmt/format.h>

#include "allocators/units.h"

namespace gmb {

std::string markdown_escape(std::string_view text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|') out += "\\|";
    else if (ch == '\n' || ch == '\r') out += ' ';
    else out += ch;
  }
  return out;
}

std::string csv_quote(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string latex_escape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    switch (ch) {
      case '\\': out += "\\textbackslash{}"; break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      case '_': case '%': case '&': case '#': case '$': case '{': case '}':
        out += '\\';
        out += ch;
        break;
      case '<': out += "\\textless{}"; break;
      case '|': out += "\\textbar{}"; break;
      case '>': out += "\\textgreater{}"; break;
      case '\n': out += ' '; break;
      default:
        // UTF-8 en dash (U+2013) as TeX's own.
        if (static_cast<unsigned char>(ch) == 0xE2 && i + 2 < text.size() &&
            static_cast<unsigned char>(text[i + 1]) == 0x80 && static_cast<unsigned char>(text[i + 2]) == 0x93) {
          out += "--";
          i += 2;
        } else {
          out += ch;
        }
    }
  }
  return out;
}

std::string format_number(double value, int significant) {
  if (!std::isfinite(value)) return value > 0 ? "inf" : value < 0 ? "-inf" : "nan";
  if (value == 0) return "0";
  double a = std::fabs(value);
  if (a < 1e-3) return fmt::format("{:.3g}", value);
  int magnitude = static_cast<int>(std::floor(std::log10(a)));
  int decimals = std::max(0, significant - 1 - magnitude);
  std::string s = fmt::format("{:.{}f}", value, decimals);
  // Rounding can add a digit (9.9996 -> "10.000"): drop the extra decimal.
  if (decimals > 0) {
    std::string again = fmt::format("{:.{}f}", value, decimals - 1);
    double r = std::fabs(std::stod(s));
    if (r >= std::pow(10.0, magnitude + 1)) s = again;
  }
  return s;
}

ByteUnit byte_unit_for(double largest_bytes) {
  if (largest_bytes >= 10.0 * double(GiB)) return {"GiB", double(GiB), 2};
  return {"MiB", double(MiB), 1};
}

std::string format_in(double bytes, const ByteUnit& unit) {
  return fmt::format("{:.{}f}", bytes / unit.bytes, unit.decimals);
}

}  // namespace gmb
