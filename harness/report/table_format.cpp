#include "harness/report/table_format.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "common/units.h"

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

std::string latex_label(std::string_view text) {
  // Products first, on the raw text: " x " between words and " x" before a number ("pad x64").
  std::string raw(text), marked;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const bool product = raw[i] == 'x' && i > 0 && raw[i - 1] == ' ' && i + 1 < raw.size() &&
                         (raw[i + 1] == ' ' || std::isdigit(static_cast<unsigned char>(raw[i + 1])));
    marked += product ? '\x01' : raw[i];
  }
  std::string escaped = latex_escape(marked), out;
  int depth = 0;  // inside [options]
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    const char ch = escaped[i];
    if (ch == '\x01') {
      out += "$\\times$";
      continue;
    }
    out += ch;
    depth += ch == '[' ? 1 : ch == ']' && depth > 0 ? -1 : 0;
    // A name stays whole ("cuda_malloc"); options break at _ too ("expandable_segments:True").
    const bool option_underscore = depth > 0 && ch == '_' && i > 0 && escaped[i - 1] == '\\';
    if (option_underscore || ch == ',' || ch == ':' || ch == '/' || ch == '=' || ch == '[') out += "\\allowbreak{}";
  }
  return out;
}

std::string NumberColumn::operator()(double value) const {
  if (!std::isfinite(value)) return value > 0 ? "inf" : value < 0 ? "-inf" : "nan";
  return fmt::format("{:.{}f}", value, decimals);
}

NumberColumn number_column(const std::vector<double>& values, int significant) {
  double largest = 0, smallest = 0;
  for (double v : values) {
    if (!std::isfinite(v) || v == 0) continue;
    const double a = std::fabs(v);
    largest = std::max(largest, a);
    smallest = smallest == 0 ? a : std::min(smallest, a);
  }
  if (largest == 0) return {0};
  auto decimals_for = [](double a, int digits) {
    return std::max(0, digits - 1 - static_cast<int>(std::floor(std::log10(a))));
  };
  // 9.9996 with 3 decimals prints "10.000": a rounding that gains a digit needs one fewer.
  int d = decimals_for(largest, significant);
  if (d > 0 && std::fabs(std::stod(fmt::format("{:.{}f}", largest, d))) >= std::pow(10.0, significant - d)) --d;
  return {std::min(3, std::max(d, decimals_for(smallest, 2)))};
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
