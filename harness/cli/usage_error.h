// A command line that cannot run (a flag's value, a combination of flags): exit 2, nothing written.
#pragma once

#include <stdexcept>

namespace gmb {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace gmb
