// The --config option's value check, shared by the run and the frontier: a file, or a shipped
// config by name (find_config). The value becomes the file's path; an error lists the shipped
// configs and CLI11 reports it as a usage error (exit 2).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "harness/cli/shipped_configs.h"

namespace gmb {

inline CLI::Validator shipped_config_lookup() {
  return CLI::Validator(
      [](std::string& value) {
        ConfigLookup found = find_config(value);
        if (!found.path) return found.error;
        value = *found.path;
        return std::string();
      },
      "FILE|NAME");
}

}  // namespace gmb
