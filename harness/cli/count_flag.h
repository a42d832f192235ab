// Validators for the number flags several commands share: a step count (--steps of a run, plan,
// frontier, merge and reduce) and a time limit in seconds (reduce --max-seconds). CLI11's own
// conversions let through what these refuse: -1 as a step count (it wraps to 2^64 - 1), a count
// past 2^64 - 1 (capped), and nan or inf as seconds.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

namespace gmb {

inline CLI::Validator step_count_flag() {
  return CLI::Validator(
      [](const std::string& v) {
        const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || v.find_first_not_of('0') == std::string::npos)
          return "'" + v + "' is not a step count (a whole number, 1 or more)";
        errno = 0;
        std::strtoull(v.c_str(), nullptr, 10);
        if (errno == ERANGE) return "'" + v + "' is larger than the largest step count, 18446744073709551615";
        return std::string();
      },
      "N");
}

inline CLI::Validator seconds_flag() {
  return CLI::Validator(
      [](const std::string& v) {
        char* end = nullptr;
        const double s = std::strtod(v.c_str(), &end);
        if (v.empty() || *end != '\0' || !std::isfinite(s) || s < 0)
          return "'" + v + "' is not a number of seconds (0 or more, e.g. 120 or 2.5)";
        return std::string();
      },
      "SECONDS");
}

}  // namespace gmb
