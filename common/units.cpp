#include "common/units.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace gmb {

std::optional<Bytes> parse_size(std::string_view text) {
  std::string s(text);
  // trim
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t start = 0;
  while (start < s.size() && std::isspace(static_cast<unsigned char>(s[start]))) ++start;
  s = s.substr(start);
  if (s.empty() || s[0] == '-' || s[0] == '+') return std::nullopt;
  std::size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.')) ++pos;
  if (pos == 0) return std::nullopt;
  std::string number = s.substr(0, pos);
  std::string unit = s.substr(pos);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  struct Unit { const char* name; double factor; };
  static const Unit units[] = {
      {"", 1},          {"B", 1},         {"KiB", 1024.0},  {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},      {"MB", 1e6},      {"GB", 1e9},      {"TB", 1e12},
  };
  const Unit* found = nullptr;
  for (const auto& u : units)
    if (unit == u.name) found = &u;
  if (!found) return std::nullopt;
  if (number.find('.') == std::string::npos) {
    // Integers exactly, without going through double.
    errno = 0;
    char* end = nullptr;
    unsigned long long n = std::strtoull(number.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') return std::nullopt;
    auto factor = static_cast<unsigned long long>(found->factor);
    if (factor != 0 && n > UINT64_MAX / factor) return std::nullopt;
    return static_cast<Bytes>(n * factor);
  }
  if (number.find('.') != number.rfind('.') || number == ".") return std::nullopt;
  double value = std::strtod(number.c_str(), nullptr) * found->factor;
  if (!std::isfinite(value) || value < 0 || value > 1.8e19) return std::nullopt;
  double whole = std::round(value);
  if (std::fabs(whole - value) > 1e-6 * std::max(1.0, value)) return std::nullopt;  // not whole bytes
  return static_cast<Bytes>(whole);
}

std::string format_bytes(Bytes bytes) {
  if (bytes < KiB) return fmt::format("{} B", bytes);
  if (bytes < MiB) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / KiB);
  if (bytes < GiB) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / MiB);
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / GiB);
}

std::optional<bool> parse_bool(std::string_view text) {
  if (text == "true" || text == "True" || text == "TRUE" || text == "1" || text == "yes") return true;
  if (text == "false" || text == "False" || text == "FALSE" || text == "0" || text == "no") return false;
  return std::nullopt;
}

}  // namespace gmb
