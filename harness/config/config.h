// A YAML config -> the cases to run (workloads x allocators) and how to run them.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/run/runner.h"
#include "harness/config/yaml_reader.h"

namespace gmb {

struct AllocatorSpec {
  std::string name;
  AllocatorOptions options;
  std::string label;  // `label:` in the YAML: the tables' name for this setting; empty: allocator_label
  // What the tables call it: the `label:` given, else "name[options]".
  std::string display_label() const;
};

struct WorkloadSpec {
  std::string kind;
  std::function<std::unique_ptr<Workload>()> make;
  // Parameters an OOM frontier search may vary (name -> the config's value), and how to make
  // the workload with one of them set (throws std::invalid_argument for a value it cannot take).
  std::vector<std::pair<std::string, std::uint64_t>> params;
  std::function<std::unique_ptr<Workload>(const std::string& param, std::uint64_t value)> make_with;
  std::vector<std::string> notes;  // for the user before the run (a trace: its format and the reader's notes)
  std::vector<std::string> input_files;  // files the workload reads (a trace, a histogram): part of its cases' ids
  nlohmann::json params_json;  // the YAML parameters as JSON (scalars as written): part of its cases' ids
  // trace `memory_limit:` the limit the recorded run ran under (set_per_process_memory_fraction),
  // given to the caching allocator as its memory_limit_bytes (0: none).
  Bytes memory_limit_bytes = 0;
  // A PyTorch snapshot: the allocator settings it recorded, and where the driver put its
  // segments. A caching case with exactly those settings places segments there, as `replay`
  // does (case_settings), so a config's figures for it are PyTorch's own.
  bool has_recorded_alloc_conf = false;
  std::string recorded_alloc_conf{};
  std::vector<std::pair<Bytes, DevPtr>> recorded_placements{};
  // The GPU the trace was recorded on (a snapshot's device): the number the caching allocator's
  // OOM message names on sim, as `replay` does (DeviceSpec::ordinal).
  int recorded_device = 0;
};

// A file a config names: a relative path is the file beside the config (in config_dir) where
// that exists or no file of the path does, else the working folder's.
std::string beside_config(const std::string& path, const std::string& config_dir);

// The allocator options of one case: the allocator's own, plus the workload's memory limit for
// `caching` when the allocator entry does not set memory_limit_bytes itself.
AllocatorOptions case_options(const AllocatorSpec& allocator, const WorkloadSpec& workload);
// Whether the case replays a snapshot through the caching allocator with the settings it
// recorded (the same decisions, however the option string is spelled): the recorded run.
bool replays_recorded_run(const AllocatorSpec& allocator, const WorkloadSpec& workload);
// The run settings of one case: `run`, with the snapshot's recorded segment placements where it
// replays the recorded run.
RunSettings case_settings(const RunSettings& run, const AllocatorSpec& allocator, const WorkloadSpec& workload);

// `frontier:` section (and `gpumembench frontier` flags): the parameter to bisect and its range.
struct FrontierSpec {
  std::string param = "capacity";  // capacity | batch | seq_len
  std::uint64_t lo = 0, hi = 0;    // 0: chosen by the search (see harness/frontier/frontier.h)
  std::uint64_t resolution = 0;    // 0: 2 MiB for capacity, 1 for batch and seq_len
};
const std::vector<std::string>& frontier_params();

struct Config {
  std::string path;
  std::string name;
  DeviceSpec device;                // device.capacity_bytes: the first of `capacities`
  std::vector<Bytes> capacities;    // `device: {capacity: [8GiB, 12GiB]}`: one set of cases each
  std::vector<AllocatorSpec> allocators;
  std::vector<WorkloadSpec> workloads;
  RunSettings run;
  std::vector<std::string> formats;  // from `output: {formats: [...]}`; empty: the default
  std::string baseline;              // from `output: {baseline: NAME}`; empty: none
  std::vector<std::string> metrics;  // from `output: {metrics: [...]}`: metric families the tables show
  std::optional<FrontierSpec> frontier;
};

// Throws ConfigError (file, line, column, key, valid choices) for anything wrong;
// nothing is run on a bad config.
Config load_config(const std::string& path);

// --allocator (a run and `frontier`): keep only the config's allocators named (every setting of
// that allocator) or labelled (one setting, as the tables print it) by one of `flags`; none
// given keeps all. Throws std::invalid_argument naming a flag that matches none, with the labels.
void select_allocators(Config& config, const std::vector<std::string>& flags);

// What --baseline and `output: {baseline: ...}` accept: a row label as the tables print it, or
// an allocator's name where the config has one setting of it. The first form serves `merge`,
// whose settings come from the case files (each setting once).
struct AllocatorSetting {
  std::string label;  // the row label
  std::string name;   // the allocator
};
std::vector<std::string> baseline_choices(const std::vector<AllocatorSetting>& settings);
std::vector<std::string> baseline_choices(const Config& config);

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
