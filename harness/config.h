// A YAML config -> the cases to run (workloads x allocators) and how to run them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/runner.h"
#include "harness/yaml_reader.h"

namespace gmb {

struct AllocatorSpec {
  std::string name;
  AllocatorOptions options;
};

struct WorkloadSpec {
  std::string kind;
  std::function<std::unique_ptr<Workload>()> make;
};

struct Config {
  std::string path;
  std::string name;
  DeviceSpec device;
  std::vector<AllocatorSpec> allocators;
  std::vector<WorkloadSpec> workloads;
  RunSettings run;
  std::vector<std::string> formats;  // from `output: {formats: [...]}`; empty: the default
};

// Throws ConfigError (file, line, column, key, valid choices) for anything wrong;
// nothing is run on a bad config.
Config load_config(const std::string& path);

// The workload kinds a config can name, each with its YAML keys and parser.
struct WorkloadKind {
  std::string name;
  std::vector<std::string> keys;
  // node: the workload's parameter map; key: its path for messages ("workloads[0].hole_pattern");
  // config_dir: for resolving relative file names.
  std::function<WorkloadSpec(const YamlReader&, const YAML::Node& node, const std::string& key,
                             const std::string& config_dir)>
      parse;
};
const std::vector<WorkloadKind>& workload_kinds();

const std::vector<std::string>& valid_formats();  // md, csv, json, latex

}  // namespace gmb
