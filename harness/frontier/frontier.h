// OOM frontier: for a workload and each allocator, the smallest capacity (or the largest batch
// size or sequence length) that runs every step without an OOM, found by bisection.
//
// The search assumes the outcome is monotone in the parameter (more capacity never hurts, a
// larger batch never helps). An allocator can break that (a policy's decisions change with the
// capacity); the result always names a value that passed and the nearest value that failed,
// both actually run, so a reader can check the claim at those two points.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/config/config.h"

namespace gmb {

enum class FrontierDirection {
  SmallestPassing,  // capacity: the smallest value that passes
  LargestPassing,   // batch, seq_len: the largest value that passes
};

struct BisectResult {
  std::optional<std::uint64_t> pass;  // the frontier: nullopt when no value in range passed
  std::optional<std::uint64_t> fail;  // the nearest failing value probed (nullopt: none failed)
};

// Bisection over [lo, hi] on a grid of `resolution` (lo and hi are probed first; values are
// lo + k * resolution, hi included). `passes` is called once per value at most.
BisectResult bisect_frontier(FrontierDirection direction, std::uint64_t lo, std::uint64_t hi,
                             std::uint64_t resolution, const std::function<bool(std::uint64_t)>& passes);

struct FrontierProbe {
  std::uint64_t value = 0;
  bool passed = false;
  Bytes capacity_bytes = 0;  // left to the allocator in this probe (cuda: measured)
  Bytes peak_reserved_bytes = 0, peak_allocated_bytes = 0;
  std::uint64_t steps_completed = 0;
  std::optional<OomRecord> oom;
  std::string error;  // the probe could not run (device error, a value the workload cannot take)
};

struct FrontierRow {
  std::string allocator;  // registry name (decides what is modeled on sim)
  std::string allocator_label, workload_label;
  Bytes capacity_bytes = 0;  // batch/seq_len: the capacity the search ran at (requested)
  Bytes memory_limit_bytes = 0;  // the allocator's limit from the trace's memory_limit (no capacity lifts it)
  std::optional<std::uint64_t> frontier;
  std::optional<std::uint64_t> nearest_failure;
  // The range bisected and its resolution, as used (the spec's, or what the search chose).
  std::uint64_t lo = 0, hi = 0, resolution = 0;
  std::vector<FrontierProbe> probes;  // in the order they ran
  std::string error;                  // non-empty: the search stopped on a probe error
  const FrontierProbe* probe(std::uint64_t value) const;
  // Two probes that break the search's assumption: one that passed at a value where the
  // direction says a failure should be (capacity: a pass below a failure), as (pass, fail).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> contradiction(FrontierDirection direction) const;
};

struct FrontierReport {
  std::string tool_version, config_name, config_path, command_line, started_at;
  DeviceInfo device;
  FrontierSpec spec;  // lo/hi as asked (0: chosen by the search)
  std::vector<FrontierRow> rows;
};

using FrontierProgress = std::function<void(const FrontierRow&, const FrontierProbe&)>;

// Runs the search for every workload x allocator of the config (batch/seq_len: at every
// configured capacity). Throws std::invalid_argument when a workload cannot vary the parameter.
FrontierReport run_frontier(const Config& config, const FrontierSpec& spec, DeviceChoice device,
                            std::optional<Bytes> capacity_override, const FrontierProgress& progress = {});

// "1900 MiB" (capacity, exact), "12" (batch, seq_len).
std::string frontier_value_text(const std::string& param, std::uint64_t value);
nlohmann::json frontier_json(const FrontierReport& r);
std::string frontier_markdown(const FrontierReport& r);
std::string frontier_csv(const FrontierReport& r);
// frontier.json, frontier.md, frontier.csv into dir.
void write_frontier_reports(const FrontierReport& r, const std::string& dir);

}  // namespace gmb
