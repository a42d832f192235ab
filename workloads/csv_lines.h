// The lines of a text trace (native CSV, RMM log), scanned in the input's buffer: no copy and no
// allocation per line, which is what lets a reader parse tens of millions of lines a second.
#pragma once

#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "workloads/byte_input.h"

namespace gmb {

class CsvLines {
 public:
  // A line of a text trace is short (under 200 bytes); one longer than this is not a line of
  // one (/dev/zero, a binary file, a 100 MB field) and ends the read with an error at once
  // instead of buffering it whole.
  static constexpr std::size_t kMaxLineBytes = std::size_t(1) << 20;

  explicit CsvLines(ByteInput& in) : in_(in) {}

  // The next line without its end ("\n" or "\r\n"); false at the end of the content. The view
  // is valid until the next call.
  bool next(std::string_view& line) {
    for (;;) {
      const std::string_view buf = in_.buffered();
      const void* nl = buf.empty() ? nullptr : std::memchr(buf.data(), '\n', buf.size());
      if (nl) {
        const std::size_t len = static_cast<std::size_t>(static_cast<const char*>(nl) - buf.data());
        line = buf.substr(0, len);
        line_offset_ = in_.offset();
        in_.consume(len + 1);
        break;
      }
      if (buf.size() > kMaxLineBytes)
        in_.fail_after_checking_the_rest(TraceError::at_byte(
            in_.path(), in_.offset(),
            fmt::format("line {} is longer than {} MiB (no line end in its first {} bytes): not a line of a text trace",
                        line_number_ + 1, kMaxLineBytes >> 20, buf.size())));
      if (!in_.refill()) {  // the last line may lack its newline
        if (buf.empty()) return false;
        line = in_.buffered();
        line_offset_ = in_.offset();
        in_.consume(line.size());
        break;
      }
    }
    ++line_number_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return true;
  }
  // A reader that parsed the next `lines` lines straight from buffered() moves past them here:
  // `bytes` in all (each with its '\n'), the last starting at byte last_at of them.
  void skip_lines(std::size_t bytes, std::uint64_t lines, std::size_t last_at) {
    line_offset_ = in_.offset() + last_at;
    in_.consume(bytes);
    line_number_ += lines;
  }
  std::uint64_t line_number() const { return line_number_; }  // of the line last returned
  std::uint64_t line_offset() const { return line_offset_; }  // its byte offset

  // Splits at commas (n commas: n + 1 fields), trimming blanks around each field. Fills at most
  // `max` views; returns the number of fields.
  static std::size_t split(std::string_view line, std::string_view* fields, std::size_t max) {
    std::size_t n = 0;
    std::size_t start = 0;
    for (;;) {
      std::size_t comma = line.find(',', start);
      const std::size_t stop = comma == std::string_view::npos ? line.size() : comma;
      if (n < max) fields[n] = trim(line.substr(start, stop - start));
      ++n;
      if (comma == std::string_view::npos) return n;
      start = comma + 1;
    }
  }
  static std::string_view trim(std::string_view f) {
    while (!f.empty() && (f.back() == ' ' || f.back() == '\t' || f.back() == '\r')) f.remove_suffix(1);
    while (!f.empty() && (f.front() == ' ' || f.front() == '\t')) f.remove_prefix(1);
    return f;
  }
  // The decimal number of 1 to 15 digits at p, eight bytes at a time (SWAR: no branch per
  // digit). 16 bytes from p must be readable. Returns the number of digits: 0 when p holds no
  // digit, 16 or more when it holds 16 digits or more (then v is not set: the caller's careful
  // path reads it).
  static int decimal16(const char* p, std::uint64_t& v) {
    const std::uint64_t a = load8(p);
    const int n = leading_digits(a);
    if (n < 8) {
      v = n ? eight_digits(a, n) : 0;
      return n;
    }
    const std::uint64_t b = load8(p + 8);
    const int m = leading_digits(b);
    if (m == 8) return 16;
    static constexpr std::uint64_t kPow10[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
    v = eight_digits(a, 8) * kPow10[m] + (m ? eight_digits(b, m) : 0);
    return 8 + m;
  }
  static std::uint64_t load8(const char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);  // the first byte in the low bits, as below assumes
#endif
    return w;
  }
  // How many of the 8 bytes of w (the first in the low bits) are ASCII digits before the
  // first that is not. A digit byte is 0x30-0x39: its high nibble is 3, and so is the high
  // nibble of byte + 6 (a carry out of a non-digit byte only reaches the bytes after it).
  static int leading_digits(std::uint64_t w) {
    constexpr std::uint64_t kHigh = 0xF0F0F0F0F0F0F0F0ull;
    const std::uint64_t other =
        ((w & kHigh) | (((w + 0x0606060606060606ull) & kHigh) >> 4)) ^ 0x3333333333333333ull;
    return other ? __builtin_ctzll(other) >> 3 : 8;
  }
  // The value of the first n (1 to 8) digit bytes of w: the digits moved to the top (zeros,
  // that is leading zero digits, below them), then pairs, quads and octets combined by three
  // multiplications.
  static std::uint64_t eight_digits(std::uint64_t w, int n) {
    w = (w & 0x0F0F0F0F0F0F0F0Full) << (8 * (8 - n));
    w = (w * 2561) >> 8;
    w = ((w & 0x00FF00FF00FF00FFull) * 6553601) >> 16;
    return ((w & 0x0000FFFF0000FFFFull) * 42949672960001ull) >> 32;
  }

  // A decimal count: digits only, at most 20 of them, no overflow.
  static bool parse_u64(std::string_view s, std::uint64_t& out) {
    if (s.empty() || s.size() > 20) return false;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  }

 private:
  ByteInput& in_;
  std::uint64_t line_number_ = 0;
  std::uint64_t line_offset_ = 0;
};

}  // namespace gmb
