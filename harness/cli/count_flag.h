// Validators for the number flags several commands share: a step count (--steps of a run, plan,
// frontier, merge and reduce), a whole number (reduce --workload, --max-replays), a device number
// (--trace-device of replay and reduce) and a time limit in seconds (reduce --max-seconds).
// CLI11's own conversions let through what these refuse: -1 (it wraps to 2^64 - 1), a count past
// 2^64 - 1 (capped), a leading zero (read as octal: 010 is 8), and nan or inf as seconds.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace gmb {

// Empty when v is a whole number from `min` to 2^64 - 1 written in decimal; else what it is not.
inline std::string whole_number_problem(const std::string& v, unsigned min, const char* noun) {
  const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || (v.size() > 1 && v[0] == '0') || (min > 0 && v == "0"))
    return fmt::format("'{}' is not a {} ({} or more, in decimal without leading zeros)", v, noun, min);
  errno = 0;
  std::strtoull(v.c_str(), nullptr, 10);
  if (errno == ERANGE) return fmt::format("'{}' is larger than the largest {}, 18446744073709551615", v, noun);
  return std::string();
}

inline CLI::Validator step_count_flag() {
  return CLI::Validator([](const std::string& v) { return whole_number_problem(v, 1, "step count"); }, "N");
}

inline CLI::Validator whole_number_flag() {
  return CLI::Validator([](const std::string& v) { return whole_number_problem(v, 0, "whole number"); }, "N");
}

// A device's number in a snapshot (--trace-device): 0 to 2^31 - 1, in decimal.
inline CLI::Validator device_number_flag() {
  return CLI::Validator(
      [](const std::string& v) {
        const std::string problem = whole_number_problem(v, 0, "device number");
        errno = 0;
        const unsigned long long n = problem.empty() ? std::strtoull(v.c_str(), nullptr, 10) : 0;
        if (problem.find("larger than") != std::string::npos || n > 2147483647ull)
          return fmt::format("'{}' is larger than the largest device number, 2147483647", v);
        return problem;
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
