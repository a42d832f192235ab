// Input quoted back in error messages: short and printable. In the lowest layer so that every
// layer (alloc_conf, config, trace readers) quotes what it was given the same way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gmb {

// At most max_bytes of `bytes` as printable ASCII: other bytes as \xNN, \n \r \t \\ \" escaped,
// "..." when cut. For error messages: never raw bytes to the terminal.
std::string escaped_excerpt(std::string_view bytes, std::size_t max_bytes = 40);

}  // namespace gmb
