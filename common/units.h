// Sizes written by people ("100MiB", "1.5GB", "4096") and sizes shown to people.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/types.h"

namespace gmb {

// Accepts a plain byte count or a number with B, KiB, MiB, GiB, TiB (binary) or KB, MB, GB,
// TB (decimal); fractions allowed with a unit ("1.5GiB"). nullopt on anything else,
// including negative numbers and results that are not whole bytes.
std::optional<Bytes> parse_size(std::string_view text);
// "250.0 MiB", "2.00 GiB", "512 B": binary units for humans.
std::string format_bytes(Bytes bytes);
// Parses "true/false/True/False/1/0/yes/no".
std::optional<bool> parse_bool(std::string_view text);

}  // namespace gmb
