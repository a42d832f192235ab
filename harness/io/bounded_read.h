// A whole input file read with a bound: /dev/zero or a 100 MB line ends in an error, not in all
// memory, and a FIFO nobody writes to reads as empty instead of blocking for ever.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace gmb {

struct BoundedReadError : std::runtime_error {
  using std::runtime_error::runtime_error;  // "cannot open ...: why", "larger than N MiB"
};

std::string read_file_bounded(const std::string& path, std::size_t max_bytes);

}  // namespace gmb
