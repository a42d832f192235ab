// Writes unsigned numbers as decimal text into a buffer sized beforehand: for the large number
// tables written in place (an OOM's usage window, 131,072 rows of four numbers), where building a
// string per number costs more than the numbers. The caller's buffer must have room for each
// number (20 digits at most) and its separator.
#pragma once

#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace gmb {

// Writes v's digits at p, then `after`; advances p past them.
inline void put_decimal(char*& p, std::uint64_t v, char after) {
  const fmt::format_int digits(v);
  std::memcpy(p, digits.data(), digits.size());
  p += digits.size();
  *p++ = after;
}

}  // namespace gmb
