// Typed reads of allocator options, throwing OptionError that names the key.
#pragma once

#include <charconv>

#include <fmt/format.h>

#include "allocators/allocator.h"
#include "common/text_excerpt.h"
#include "common/units.h"

namespace gmb {

inline bool option_bool(const AllocatorOptions& o, const std::string& key, bool fallback) {
  auto it = o.find(key);
  if (it == o.end()) return fallback;
  auto v = parse_bool(it->second);
  if (!v) throw OptionError(key, fmt::format("'{}' is not a boolean", it->second), "true, false");
  return *v;
}

// A size, or "max" for UINT64_MAX where allow_max.
inline Bytes option_size(const AllocatorOptions& o, const std::string& key, Bytes fallback,
                         bool allow_max = false) {
  auto it = o.find(key);
  if (it == o.end()) return fallback;
  if (allow_max && it->second == "max") return UINT64_MAX;
  auto v = parse_size(it->second);
  if (!v)
    throw OptionError(key, fmt::format("'{}' is not a size", it->second),
                      allow_max ? "a size such as 512MiB, 1GB, 4096, or max" : "a size such as 512MiB, 1GB, 4096");
  return *v;
}

// A count: digits only, at most 2^64 - 1 (a longer one is an error, never a wrap or a throw
// other than OptionError).
inline std::uint64_t option_count(const AllocatorOptions& o, const std::string& key, std::uint64_t fallback) {
  auto it = o.find(key);
  if (it == o.end()) return fallback;
  const std::string& s = it->second;
  std::uint64_t v = 0;
  const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (!digits || ec != std::errc() || end != s.data() + s.size())
    throw OptionError(key,
                      fmt::format("'{}' is not a non-negative integer{}", escaped_excerpt(s, 80),
                                  digits ? " below 2^64" : ""),
                      "0, 1, 2, ... up to 18446744073709551615");
  return v;
}

}  // namespace gmb
