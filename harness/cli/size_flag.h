// The value of a size flag (--capacity, --memory-limit, --lo/--hi of a capacity search): a size as
// config files write it ("24GiB", "512MiB", "1073741824"), above zero and at most the largest
// device accepted. One parser, so every flag says the same thing for the same mistake.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "common/text_excerpt.h"
#include "common/units.h"

namespace gmb {

// Throws std::invalid_argument naming the flag and the valid range; the callers map it to exit 2.
inline Bytes parse_size_flag(std::string_view flag, const std::string& text) {
  const std::optional<Bytes> v = parse_size(text);
  const std::string shown = escaped_excerpt(text, 80);
  if (!v)
    throw std::invalid_argument(fmt::format("{}: '{}' is not a size (valid: a byte count, or a number with B, KiB, MiB, "
                                            "GiB, TiB, KB, MB, GB or TB, from 1 B to 1024TiB; e.g. 24GiB, 512MiB, "
                                            "1073741824)",
                                            flag, shown));
  if (*v == 0) throw std::invalid_argument(fmt::format("{}: {} is no memory at all (valid: 1 B to 1024TiB)", flag, shown));
  if (*v > kMaxDeviceBytes)
    throw std::invalid_argument(
        fmt::format("{}: {} is larger than 1024TiB, the largest device accepted (valid: 1 B to 1024TiB)", flag, shown));
  return *v;
}

}  // namespace gmb
