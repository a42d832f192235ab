// What a run produces: per case, per repeat metrics, OOM records, timelines.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "allocators/allocator.h"
#include "workloads/workload.h"  // RecordedOoms

namespace gmb {

enum class OomKind { Fragmentation, Capacity };
const char* to_string(OomKind kind);

// What the workload itself needs, from its own events (they do not depend on the allocator):
// the live bytes it asks for at each point of the run as if no OOM happened, over the steps the
// run makes (--steps). An allocator that never fragments (perfect packing of the live requested
// bytes) needs exactly peak_requested_bytes; PyTorch's caching allocator at least
// peak_rounded_bytes (every request rounded up to a multiple of 512 bytes, at least 512).
// Events are numbered as the runner numbers them in a run without an OOM: allocations and
// frees, from 0.
struct WorkloadNeed {
  Bytes peak_requested_bytes = 0;
  std::uint64_t peak_requested_step = 0, peak_requested_event = 0;
  Bytes peak_rounded_bytes = 0;
  std::uint64_t peak_rounded_step = 0, peak_rounded_event = 0;
  std::uint64_t steps = 0, events = 0;
  std::vector<Bytes> step_peak_requested_bytes;  // [s]: the most live requested bytes during step s
  std::vector<Bytes> requested_from_step_bytes;  // [s]: the most at any point of steps s, s+1, ...
  // The most live requested bytes from step `step` to the end (0 past the last step).
  Bytes requested_from(std::uint64_t step) const {
    return step < requested_from_step_bytes.size() ? requested_from_step_bytes[step] : 0;
  }
};

struct OomRecord {
  std::uint64_t step = 0;
  std::uint64_t event = 0;  // 0-based index of the op within the run
  Bytes requested_bytes = 0;
  Bytes allocated_bytes = 0;
  Bytes reserved_bytes = 0;
  Bytes cached_bytes = 0;
  // What the live blocks' callers asked for (allocated - this: rounding); unknown in a case file
  // written before it was kept.
  std::optional<Bytes> live_requested_bytes;
  Bytes largest_free_block = 0;
  Bytes capacity_bytes = 0;  // what the allocator may take: the device, or its own smaller limit
  bool retried_after_freeing_cache = false;
  // The workload's most live requested bytes from this OOM's step to the end of the run (as if
  // no OOM happened): what the classification compares with the capacity.
  Bytes need_from_here_bytes = 0;
  OomKind kind = OomKind::Capacity;
  std::string message;  // the allocator's own message (PyTorch's text for caching)
  std::string origin;   // where the request came from in the user's program (traces that record it), or ""
  // 1 - allocated / reserved at the OOM: the share of the reserved memory not in use.
  double fragmentation() const {
    return reserved_bytes > allocated_bytes ? 1.0 - double(allocated_bytes) / double(reserved_bytes) : 0.0;
  }
};

// Judged against the workload's need, not the failed request: capacity when an allocator that
// never fragments (perfect packing of the live requested bytes) would also fail at this
// capacity, at this step or later in the run (the need from here on exceeds the capacity);
// fragmentation when it would not. An OOM's own step counts whole: before the first OOM every
// earlier event of the step was served, so its need there was at most the bytes allocated,
// within the capacity.
OomKind classify_oom(const WorkloadNeed& need, std::uint64_t step, Bytes capacity);

struct TimelineRow {
  std::uint64_t event;
  char action;  // 'a' alloc, 'f' free, 'r' free requested (Op::Kind::FreeRequested)
  std::uint64_t id;
  Bytes bytes;
  Bytes allocated_bytes;
  Bytes reserved_bytes;
  std::uint64_t segments;
  bool oom;
};

// Bytes in use after one event, kept up to the first OOM (the picture of how it came about).
struct UsageSample {
  std::uint64_t event;
  std::uint64_t step;
  Bytes allocated_bytes;
  Bytes reserved_bytes;
};

struct StepSample {
  std::uint64_t step;
  Bytes allocated_bytes;  // at the end of the step
  Bytes reserved_bytes;
  Bytes peak_allocated_bytes;  // running peaks
  Bytes peak_reserved_bytes;
  std::uint64_t ooms;  // OOMs so far
  Bytes step_peak_allocated_bytes;  // the most during this step (after each allocator call)
  Bytes step_peak_reserved_bytes;
  Bytes need_bytes;  // the workload's most live requested bytes during this step (WorkloadNeed)
  // Running fragmentation at peak reserved (RunMetrics::fragmentation so far): R and A.
  Bytes peak_reserved_sampled_bytes;
  Bytes allocated_at_peak_reserved_bytes;
};

struct RunMetrics {
  Bytes peak_reserved_bytes = 0;
  Bytes peak_allocated_bytes = 0;
  // Fragmentation at peak reserved: 1 - A / R, R the most bytes reserved after any allocator
  // call and A the most bytes allocated while R was reserved (the two peaks of a run usually
  // come at different moments, so their ratio says little).
  double fragmentation = 0;
  Bytes peak_reserved_sampled_bytes = 0;       // R
  Bytes allocated_at_peak_reserved_bytes = 0;  // A
  std::uint64_t steps_completed = 0;
  std::uint64_t events = 0;
  std::uint64_t allocs = 0, frees = 0, cache_hits = 0;
  std::uint64_t device_allocs = 0, device_frees = 0;
  std::uint64_t ooms = 0;
  std::uint64_t fragmentation_ooms = 0, capacity_ooms = 0;  // every OOM of the run, by kind
  double seconds = 0;          // whole run: measured on cuda, modeled on sim
  double alloc_seconds = 0;    // inside allocator calls (host clock on both devices)
  // Where the rest of the wall time went (host clock): inside the workload's compute calls
  // (kernel launches, and waits when the launch queue is full), waiting for the GPU at the end,
  // and the harness itself (event generation, bookkeeping, progress): the overhead to keep small.
  double compute_call_seconds = 0;
  double sync_seconds = 0;
  double harness_seconds = 0;
  // Part of harness_seconds: making the steps' ops, or waiting for them when a worker thread
  // makes them ahead (Workload::makes_ops_ahead).
  double event_generation_seconds = 0;
  double modeled_call_seconds = 0;  // sim: the device's modeled driver-call time (part of seconds)
  double steps_per_s = 0;
  double tokens_per_s = 0;         // real tokens
  double padded_tokens_per_s = 0;  // tokens including padding
  double hit_rate() const { return allocs ? double(cache_hits) / double(allocs) : 0; }
  std::optional<OomRecord> first_oom;
  // Inputs of the other published fragmentation metrics (fragmentation_metrics.h), absent where
  // the allocator cannot give them: PyTorch's active_bytes.all.peak (memory_stats), and its free
  // space (AllocatorInspection::free_space) at the peak-reserved point above (R, A) and right
  // after the first OOM.
  std::optional<Bytes> peak_active_bytes;
  std::optional<FreeSpace> free_space_at_peak_reserved;
  std::optional<FreeSpace> free_space_at_first_oom;
};

// The GPU a case ran on, as the worker found it just before the case (a sweep over several GPUs
// records it with every case: each case alone on its GPU, and which one).
struct CaseGpu {
  std::string name;
  std::string uuid;                 // "GPU-xxxxxxxx-...", as nvidia-smi prints it
  std::string visible_devices;      // CUDA_VISIBLE_DEVICES in the worker ("" not set)
  Bytes free_bytes_before = 0;      // cudaMemGetInfo before the case: no other case on the GPU
  Bytes total_bytes = 0;
};

// The note a case gets when its usage before the first OOM is not shown (on sim the second run
// up to that OOM did not reach the same OOM): the runner adds it, the usage picture says it.
inline constexpr const char* kUsageNotKeptNote =
    "the usage before the first OOM is not shown: the sim keeps it by running the case again to that OOM, "
    "and that run did not reach the same OOM";

struct CaseResult {
  std::string label;           // "caching[expandable_segments:True] x hole_pattern[...]"
  std::string workload;        // kind
  std::string workload_label;
  std::string allocator;
  std::string allocator_label;
  AllocatorOptions options;
  std::shared_ptr<const WorkloadNeed> need;  // the workload's need (every case that ran)
  Bytes capacity_bytes = 0;            // left to the allocator (cuda: measured after the ballast)
  Bytes capacity_requested_bytes = 0;  // as configured (0: the whole device)
  Bytes ballast_bytes = 0;             // cuda: taken up front to leave capacity_bytes
  bool throughput_modeled = false;
  bool memory_modeled = false;  // reserved figures from a driver model (native allocators on sim)
  std::optional<DeviceInfo> device;  // as the first run made it (cuda: capacity measured after the ballast)
  std::vector<RunMetrics> runs;
  std::vector<TimelineRow> timeline;  // first run, when asked for
  std::vector<StepSample> steps;      // first run
  std::vector<std::pair<std::string, std::int64_t>> memory_stats;  // end of first run
  std::string memory_summary;
  std::vector<SegmentInfo> oom_segments;  // block map at the first OOM of the first run
  // First run: every OOM (up to kMaxOomEvents) and the usage after each of the events (the
  // last oom_usage_window_events of them) up to the first.
  static constexpr std::size_t kMaxOomEvents = 10000;
  std::vector<OomRecord> oom_events;
  std::uint64_t oom_usage_window_events = 0;  // at most this many events before the OOM are kept
  std::vector<UsageSample> oom_usage;
  std::optional<RecordedOoms> recorded_ooms;  // a replayed trace's own failed allocations (first run)
  std::vector<std::string> workload_notes;    // Workload::notes() after the first run
  std::string error;  // non-empty: the case could not run
  std::optional<CaseGpu> gpu;  // cuda cases of a sweep run by case (cuda_device_info before the case)
};

struct RunReport {
  std::string tool_version;
  std::string config_name;
  std::string config_path;
  std::string command_line;
  std::string started_at;  // ISO 8601 UTC
  DeviceInfo device;
  std::string on_oom;
  std::uint64_t repeat = 1;
  std::vector<Bytes> capacity_sweep;  // the configured capacities when a config lists several
  std::string baseline;  // --baseline: the tables show each case relative to this allocator ("" none)
  // A shard of a sweep (harness/sweep/shard.h) when shard_count > 1: the cases are the shard's
  // share of the plan_cases of the whole sweep.
  std::size_t shard_index = 0, shard_count = 0, plan_cases = 0;
  std::string shard_source;
  // The fragmentation metric families the tables show beside gpumembench's own (--metrics,
  // `output: {metrics: [...]}`; docs/METRICS.md); the CSV and JSON hold every one regardless.
  std::vector<std::string> metrics;
  std::vector<CaseResult> cases;
};

// Median / min / max of one metric over a case's runs.
struct Spread {
  double median = 0, min = 0, max = 0;
};
template <typename F>
Spread spread_of(const std::vector<RunMetrics>& runs, F metric);

}  // namespace gmb

#include <algorithm>
namespace gmb {
template <typename F>
Spread spread_of(const std::vector<RunMetrics>& runs, F metric) {
  Spread s;
  if (runs.empty()) return s;
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(static_cast<double>(metric(r)));
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  return s;
}
}  // namespace gmb
