// The configs shipped with gpumembench (installed in <prefix>/share/gpumembench/configs, or the
// source tree's configs/ for a binary in its build tree): `--config NAME` lookup and the
// `gpumembench configs` listing.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace gmb {

struct ShippedConfig {
  std::string name;               // file name without .yaml
  std::filesystem::path path;
  std::string description;        // the file's first comment line, without '#'
};

// Every shipped config by name (a name in an earlier folder of shipped_config_dirs() hides the
// same name in a later one), sorted by name.
std::vector<ShippedConfig> shipped_configs();

// `--config ARG`: ARG itself when it exists (and is not a folder); else, for a bare name (no '/'), the shipped
// config ARG or ARG.yaml. The error (nullopt + message) names ARG and lists the shipped configs.
struct ConfigLookup {
  std::optional<std::string> path;
  std::string error;
};
ConfigLookup find_config(const std::string& arg);

// `gpumembench configs`: one line per shipped config, name and description. Returns the exit
// status (1 when no shipped config is found: the install is incomplete).
int list_shipped_configs(std::ostream& out, std::ostream& err);

}  // namespace gmb
