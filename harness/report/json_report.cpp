// results.json: every figure of every case (the schema the compare command and plot.py read).
#include "harness/report/json_report.h"

#include <fmt/format.h>

#include "harness/report/case_summary.h"
#include "harness/report/oom_block_map.h"
#include "harness/report/oom_diagnosis.h"
#include "harness/report/oom_json.h"
#include "harness/run/case_file.h"
#include "harness/run/fragmentation_metrics.h"

namespace gmb {

namespace {

using nlohmann::json;

json oom_json(const std::optional<OomRecord>& oom) { return oom ? oom_record_json(*oom) : json(nullptr); }

template <typename T>
json or_null(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// Every published fragmentation metric of the representative run, by its source
// (docs/METRICS.md); null where the allocator cannot give it.
json fragmentation_metrics_json(const RunMetrics& m) {
  return {{"gpumembench", m.fragmentation},
          {"gmlake", or_null(gmlake_fragmentation(m))},
          {"gmlake_peak_active_bytes", or_null(m.peak_active_bytes)},
          {"stalloc_utilization", or_null(stalloc_utilization(m))},
          {"stalloc_waste_bytes", stalloc_waste_bytes(m)},
          {"tf_bfc_at_peak_reserved", or_null(tf_bfc_fragmentation(m.free_space_at_peak_reserved))},
          {"tf_bfc_at_first_oom", or_null(tf_bfc_fragmentation(m.free_space_at_first_oom))},
          {"memory_viz_internal_free_bytes", or_null(internal_free_bytes(m.free_space_at_peak_reserved))},
          {"memory_viz_external_free_bytes", or_null(external_free_bytes(m.free_space_at_peak_reserved))},
          {"largest_free_block_at_peak_reserved_bytes",
           m.free_space_at_peak_reserved ? json(m.free_space_at_peak_reserved->largest_free_bytes) : json(nullptr)},
          {"largest_free_block_at_first_oom_bytes",
           m.free_space_at_first_oom ? json(m.free_space_at_first_oom->largest_free_bytes) : json(nullptr)}};
}

json need_json(const std::shared_ptr<const WorkloadNeed>& need) {
  if (!need) return nullptr;
  return json{{"peak_requested_bytes", need->peak_requested_bytes},
              {"peak_requested_step", need->peak_requested_step},
              {"peak_requested_event", need->peak_requested_event},
              {"peak_rounded_bytes", need->peak_rounded_bytes},
              {"peak_rounded_step", need->peak_rounded_step},
              {"peak_rounded_event", need->peak_rounded_event},
              {"steps", need->steps},
              {"events", need->events}};
}

json spread_json(const Spread& s) { return json{{"median", s.median}, {"min", s.min}, {"max", s.max}}; }

json segments_json(const std::vector<SegmentInfo>& segments) {
  json out = json::array();
  for (const auto& s : segments) {
    json blocks = json::array();
    for (const auto& b : s.blocks)
      blocks.push_back({{"offset", b.offset}, {"size", b.size}, {"allocated", b.allocated}, {"mapped", b.mapped}});
    out.push_back({{"address", s.address}, {"size", s.size}, {"stream", s.stream}, {"pool", s.pool}, {"blocks", blocks}});
  }
  return out;
}

}  // namespace

json to_json(const RunReport& r) {
  json cases = json::array();
  for (const auto& c : r.cases) {
    const RunMetrics* m = representative(c);
    const std::size_t index = static_cast<std::size_t>(&c - r.cases.data());
    json j;
    j["label"] = c.label;
    j["workload"] = c.workload;
    j["workload_label"] = c.workload_label;
    j["allocator"] = c.allocator;
    j["allocator_label"] = c.allocator_label;
    j["options"] = c.options;
    j["capacity_bytes"] = c.capacity_bytes;
    j["capacity_requested_bytes"] = c.capacity_requested_bytes;
    j["ballast_bytes"] = c.ballast_bytes;
    if (!c.error.empty()) j["error"] = c.error;
    if (c.gpu) j["gpu"] = case_gpu_json(*c.gpu);  // the GPU and its free memory before the case
    j["need"] = need_json(c.need);
    if (!m) {
      cases.push_back(j);
      continue;
    }
    j["peak_reserved_bytes"] = m->peak_reserved_bytes;
    j["peak_allocated_bytes"] = m->peak_allocated_bytes;
    j["fragmentation"] = m->fragmentation;
    j["fragmentation_at_peak_reserved"] = {{"fragmentation", m->fragmentation},
                                           {"reserved_bytes", m->peak_reserved_sampled_bytes},
                                           {"allocated_bytes", m->allocated_at_peak_reserved_bytes}};
    j["fragmentation_at_first_oom"] = m->first_oom ? json(m->first_oom->fragmentation()) : json(nullptr);
    j["fragmentation_metrics"] = fragmentation_metrics_json(*m);
    j["memory_modeled"] = c.memory_modeled;
    j["throughput"] = {{"steps_per_s", spread_of(c.runs, [](auto& x) { return x.steps_per_s; }).median},
                       {"tokens_per_s", spread_of(c.runs, [](auto& x) { return x.tokens_per_s; }).median},
                       {"padded_tokens_per_s",
                        spread_of(c.runs, [](auto& x) { return x.padded_tokens_per_s; }).median},
                       {"modeled", c.throughput_modeled}};
    j["oom"] = oom_json(m->first_oom);
    if (!c.runs.empty() && c.runs.front().first_oom) {
      // About the first run's first OOM (the one the OOM files show).
      const SameCapacityCases same = same_capacity_cases(r, index);
      j["oom_diagnosis"] = {{"kind", to_string(c.runs.front().first_oom->kind)},
                            {"what_would_fix_it", oom_diagnosis_text(r, index)},
                            {"same_capacity_settings", same.others},
                            {"completed_at_same_capacity", same.completed},
                            {"message", c.runs.front().first_oom->message}};
    }
    j["ooms"] = m->ooms;
    if (!c.workload_notes.empty()) j["workload_notes"] = c.workload_notes;
    if (c.recorded_ooms)
      j["recorded_ooms"] = {{"count", c.recorded_ooms->count},
                            {"events", c.recorded_ooms->events},
                            {"whole_trace", c.recorded_ooms->whole_trace}};
    j["steps_completed"] = m->steps_completed;
    j["events"] = m->events;
    j["allocs"] = m->allocs;
    j["frees"] = m->frees;
    j["cache_hits"] = m->cache_hits;
    j["hit_rate"] = m->hit_rate();
    j["device_mallocs"] = m->device_allocs;
    j["device_frees"] = m->device_frees;
    j["seconds"] = spread_json(spread_of(c.runs, [](auto& x) { return x.seconds; }));
    j["alloc_seconds"] = spread_json(spread_of(c.runs, [](auto& x) { return x.alloc_seconds; }));
    j["alloc_time_share"] = alloc_share(c, *m);
    j["compute_call_seconds"] = m->compute_call_seconds;
    j["sync_seconds"] = m->sync_seconds;
    j["modeled_call_seconds"] = m->modeled_call_seconds;
    j["harness_seconds"] = spread_json(spread_of(c.runs, [](auto& x) { return x.harness_seconds; }));
    j["event_generation_seconds"] =
        spread_json(spread_of(c.runs, [](auto& x) { return x.event_generation_seconds; }));
    auto hs = harness_share(c, *m);
    j["harness_overhead_share"] = hs ? json(*hs) : json(nullptr);
    j["repeats"] = c.runs.size();
    j["spread"] = {
        {"steps_per_s", spread_json(spread_of(c.runs, [](auto& x) { return x.steps_per_s; }))},
        {"peak_reserved_bytes", spread_json(spread_of(c.runs, [](auto& x) { return x.peak_reserved_bytes; }))},
        {"peak_allocated_bytes", spread_json(spread_of(c.runs, [](auto& x) { return x.peak_allocated_bytes; }))},
        {"fragmentation", spread_json(spread_of(c.runs, [](auto& x) { return x.fragmentation; }))},
        {"tokens_per_s", spread_json(spread_of(c.runs, [](auto& x) { return x.tokens_per_s; }))}};
    json steps = json::array();
    for (const auto& s : c.steps)
      steps.push_back({s.step, s.allocated_bytes, s.reserved_bytes, s.peak_allocated_bytes,
                       s.peak_reserved_bytes, s.ooms, s.step_peak_allocated_bytes, s.step_peak_reserved_bytes,
                       s.need_bytes, s.allocated_at_peak_reserved_bytes});
    // allocated/reserved: at the step's end; peak_*: running peaks; step_peak_*: the most during
    // the step; need_bytes: the workload's most live requested bytes during the step;
    // allocated_at_peak_reserved_bytes: with peak_reserved_bytes, fragmentation at peak reserved
    // so far (1 - it / peak_reserved_bytes).
    j["step_series"] = {{"columns", {"step", "allocated_bytes", "reserved_bytes", "peak_allocated_bytes",
                                     "peak_reserved_bytes", "ooms", "step_peak_allocated_bytes",
                                     "step_peak_reserved_bytes", "need_bytes", "allocated_at_peak_reserved_bytes"}},
                        {"rows", steps}};
    json stats = json::object();
    for (const auto& [k, v] : c.memory_stats) stats[k] = v;
    j["memory_stats"] = stats;
    if (!c.oom_segments.empty()) j["oom_block_map"] = segments_json(c.oom_segments);
    j["ooms_by_kind"] = {{"fragmentation", m->fragmentation_ooms}, {"capacity", m->capacity_ooms}};
    if (has_oom_details(c)) {
      std::string stem = "oom/" + oom_file_stem(index, c);
      j["oom_files"] = {{"state_json", stem + ".json"}, {"block_map_svg", stem + ".svg"},
                        {"usage_csv", stem + ".timeline.csv"}, {"usage_svg", stem + ".timeline.svg"},
                        {"ooms_csv", stem + ".ooms.csv"}};
    }
    cases.push_back(j);
  }
  json out{{"tool", {{"name", "gpumembench"}, {"version", r.tool_version}}},
              {"config", {{"name", r.config_name}, {"path", r.config_path}}},
              {"command", r.command_line},
              {"started_at", r.started_at},
              {"device",
               {{"kind", to_string(r.device.kind)},
                {"name", r.device.name},
                {"capacity_bytes", r.device.capacity_bytes},
                {"total_bytes", r.device.total_bytes},
                {"ballast_bytes", r.device.ballast_bytes},
                {"page_bytes", r.device.page_bytes},
                {"driver", r.device.driver}}},
              {"run", {{"on_oom", r.on_oom}, {"repeat", r.repeat}}},
              {"cases", cases}};
  if (!r.capacity_sweep.empty()) out["device"]["capacity_sweep_bytes"] = r.capacity_sweep;
  out["baseline"] = r.baseline.empty() ? json(nullptr) : json(r.baseline);  // the tables' --baseline
  if (r.shard_count > 1)  // a part of a sweep: `gpumembench merge` joins the parts
    out["shard"] = {{"index", r.shard_index},
                    {"count", r.shard_count},
                    {"source", r.shard_source},
                    {"cases", r.cases.size()},
                    {"plan_cases", r.plan_cases}};
  return out;
}

}  // namespace gmb
