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

namespace {

// The length of the well-formed UTF-8 sequence at text[i] (1 to 4), and its code point; 0 where
// the bytes there are no such sequence (a stray continuation byte, a truncated or overlong
// sequence, a surrogate, a code point above U+10FFFF).
std::size_t utf8_sequence(std::string_view text, std::size_t i, char32_t& cp, bool allow_surrogates = false) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  static constexpr char32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kLeast[n] || cp > 0x10ffff || (!allow_surrogates && cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Code points a terminal acts on instead of showing: C0 and C1 controls, DEL, and the bidi
// controls that reorder the text around them.
bool acts_on_terminal(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

bool is_well_formed_utf8(std::string_view text, bool allow_surrogates) {
  char32_t cp;
  for (std::size_t i = 0, n; i < text.size(); i += n) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      n = 1;
      continue;
    }
    if ((n = utf8_sequence(text, i, cp, allow_surrogates)) == 0) return false;
  }
  return true;
}

std::string well_formed_utf8(std::string_view text, bool allow_surrogates) {
  std::string out;
  out.reserve(text.size());
  char32_t cp;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text, i, cp, allow_surrogates);
    if (n == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
    } else {
      out.append(text.data() + i, n);
      i += n;
    }
  }
  return out;
}

std::string printable_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(text, i, cp);
    if (n == 0 || acts_on_terminal(cp)) {  // each of its bytes escaped
      const std::size_t bytes = n ? n : 1;
      for (std::size_t k = 0; k < bytes; ++k) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i + k]));
      i += bytes;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string printable_message(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  std::size_t from = 0;
  for (std::size_t i = 0; i <= message.size(); ++i)
    if (i == message.size() || message[i] == '\n' || message[i] == '\t') {
      out += printable_text(message.substr(from, i - from));
      if (i < message.size()) out += message[i];
      from = i + 1;
    }
  return out;
}

}  // namespace gmb
