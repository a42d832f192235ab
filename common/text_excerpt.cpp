#include "common/text_excerpt.h"

#include <algorithm>

#include <fmt/format.h>

namespace gmb {

std::string escaped_excerpt(std::string_view bytes, std::size_t max_bytes) {
  std::string out;
  const std::size_t n = std::min(bytes.size(), max_bytes);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      default:
        if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
        else out += fmt::format("\\x{:02x}", c);
    }
  }
  if (bytes.size() > max_bytes) out += "...";
  return out;
}

std::string printable_text(std::string_view text) {
  const auto control = [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7f;
  };
  if (std::none_of(text.begin(), text.end(), control)) return std::string(text);
  std::string out;
  for (char ch : text)
    if (control(ch)) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
    else out += ch;
  return out;
}

}  // namespace gmb
