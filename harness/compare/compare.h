// `gpumembench compare A/results.json B/results.json ...`: several results side by side (two
// GPUs, two versions, two settings, two workloads), cases matched by label or by allocator,
// each metric per input and its ratio to the first input (fractions: the difference in
// percentage points).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "devices/device.h"

namespace gmb {

// A bad input (missing, not JSON, not a gpumembench results.json, nothing in common with the
// first input). The message names the file; the CLI exits 2 on it.
struct CompareError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CompareInput {
  std::string path;  // the results.json that was read
  std::string name;  // short name for headers: the folder holding it, made unique
  std::string device_kind, device_name;
  Bytes capacity_bytes = 0;
  std::vector<Bytes> capacity_sweep;  // every capacity a capacity sweep ran at (empty: one capacity)
  std::string tool_version, config_name;
  std::uint64_t repeat = 1;
  nlohmann::json results;
};

// How cases of different inputs are paired: by the whole label (the same case on two devices or
// versions), or by the allocator setting alone (the same allocators on two workloads, e.g.
// dynamic against fixed sequence lengths). Auto: by allocator when the inputs' workloads
// differ, else by label.
enum class CompareMatch { Auto, Label, Allocator };
const std::vector<std::string>& compare_match_names();  // "allocator", "label"

// One case of one input.
struct CompareCell {
  bool present = false;  // the input has a case with this label
  std::string error;     // the case could not run there
  double peak_reserved_bytes = 0;
  double fragmentation = 0;
  double hit_rate = 0;
  double steps_per_s = 0;
  double tokens_per_s = 0;
  bool memory_modeled = false;
  bool throughput_modeled = false;
  bool has_oom = false;
  std::string oom_kind;
  std::uint64_t oom_step = 0;
  std::uint64_t ooms = 0;
  std::uint64_t runs = 0;
};

struct CompareRow {
  std::string label;                 // the key the cells were matched by
  std::vector<CompareCell> cells;    // one per input
  std::vector<std::string> workloads;  // per input: the case's workload (allocator matching)
};

struct Comparison {
  std::vector<CompareInput> inputs;
  std::vector<CompareRow> rows;  // the first input's cases in its order, then the others'
  std::size_t common = 0;        // cases present in every input
  bool any_tokens = false;       // some input measured tokens/s
  CompareMatch match = CompareMatch::Label;  // how the cases were paired (never Auto)
};

// Reads one input: a results.json, or a folder holding one. Throws CompareError naming it.
CompareInput load_compare_input(const std::string& path);

// Matches the cases of the inputs (CompareMatch). Throws CompareError when there are fewer than
// two inputs or an input shares no case with the first.
Comparison compare_results(std::vector<CompareInput> inputs, CompareMatch match = CompareMatch::Auto);

std::string compare_markdown(const Comparison& c);
std::string compare_csv(const Comparison& c);
nlohmann::json compare_json(const Comparison& c);
std::string compare_latex(const Comparison& c);

// Writes compare.{md,csv,json,tex} for the chosen formats into dir.
void write_compare(const Comparison& c, const std::string& dir, const std::vector<std::string>& formats);
// The chosen formats, one after another, for stdout.
std::string compare_text(const Comparison& c, const std::vector<std::string>& formats);

}  // namespace gmb
