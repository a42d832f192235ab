#include "harness/run/case_file.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <fmt/format.h>

#include "common/decimal_writer.h"
#include "harness/io/bounded_read.h"
#include "harness/run/json_text.h"

namespace gmb {

namespace {

using nlohmann::json;

// Doubles as JSON numbers (nlohmann writes the shortest text that reads back to the same bits);
// a non-finite one as a string, since JSON has no infinity.
json num(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}
double num_of(const json& j) {
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  return j.get<double>();
}

json oom_record_json(const OomRecord& o) {
  return {{"step", o.step},
          {"event", o.event},
          {"requested_bytes", o.requested_bytes},
          {"allocated_bytes", o.allocated_bytes},
          {"reserved_bytes", o.reserved_bytes},
          {"cached_bytes", o.cached_bytes},
          {"live_requested_bytes", o.live_requested_bytes ? json(*o.live_requested_bytes) : json()},
          {"largest_free_block", o.largest_free_block},
          {"capacity_bytes", o.capacity_bytes},
          {"retried_after_freeing_cache", o.retried_after_freeing_cache},
          {"need_from_here_bytes", o.need_from_here_bytes},
          {"kind", to_string(o.kind)},
          {"message", o.message},
          {"origin", o.origin}};
}
OomRecord oom_record_from(const json& j) {
  OomRecord o;
  o.step = j.at("step").get<std::uint64_t>();
  o.event = j.at("event").get<std::uint64_t>();
  o.requested_bytes = j.at("requested_bytes").get<Bytes>();
  o.allocated_bytes = j.at("allocated_bytes").get<Bytes>();
  o.reserved_bytes = j.at("reserved_bytes").get<Bytes>();
  o.cached_bytes = j.at("cached_bytes").get<Bytes>();
  // (Not in case files of earlier versions: unknown there.)
  if (j.contains("live_requested_bytes") && !j.at("live_requested_bytes").is_null())
    o.live_requested_bytes = j.at("live_requested_bytes").get<Bytes>();
  o.largest_free_block = j.at("largest_free_block").get<Bytes>();
  o.capacity_bytes = j.at("capacity_bytes").get<Bytes>();
  o.retried_after_freeing_cache = j.at("retried_after_freeing_cache").get<bool>();
  o.need_from_here_bytes = j.at("need_from_here_bytes").get<Bytes>();
  const std::string kind = j.at("kind").get<std::string>();
  if (kind != "capacity" && kind != "fragmentation") throw CaseFileError("an OOM of unknown kind '" + kind + "'");
  o.kind = kind == "capacity" ? OomKind::Capacity : OomKind::Fragmentation;
  o.message = j.at("message").get<std::string>();
  o.origin = j.at("origin").get<std::string>();
  return o;
}

json free_space_json(const std::optional<FreeSpace>& f) {
  if (!f) return nullptr;
  return {{"free_bytes", f->free_bytes},
          {"largest_free_bytes", f->largest_free_bytes},
          {"allocated_bytes", f->allocated_bytes},
          {"requested_bytes", f->requested_bytes}};
}
// Absent or null: the allocator has no block view (or the file predates the field).
std::optional<FreeSpace> free_space_from(const json& run, const char* key) {
  if (!run.contains(key) || run.at(key).is_null()) return std::nullopt;
  const json& j = run.at(key);
  FreeSpace f;
  f.free_bytes = j.at("free_bytes").get<Bytes>();
  f.largest_free_bytes = j.at("largest_free_bytes").get<Bytes>();
  f.allocated_bytes = j.at("allocated_bytes").get<Bytes>();
  f.requested_bytes = j.at("requested_bytes").get<Bytes>();
  return f;
}

json run_json(const RunMetrics& m) {
  return {{"peak_reserved_bytes", m.peak_reserved_bytes},
          {"peak_allocated_bytes", m.peak_allocated_bytes},
          {"fragmentation", num(m.fragmentation)},
          {"peak_reserved_sampled_bytes", m.peak_reserved_sampled_bytes},
          {"allocated_at_peak_reserved_bytes", m.allocated_at_peak_reserved_bytes},
          {"steps_completed", m.steps_completed},
          {"events", m.events},
          {"allocs", m.allocs},
          {"frees", m.frees},
          {"cache_hits", m.cache_hits},
          {"device_allocs", m.device_allocs},
          {"device_frees", m.device_frees},
          {"ooms", m.ooms},
          {"fragmentation_ooms", m.fragmentation_ooms},
          {"capacity_ooms", m.capacity_ooms},
          {"seconds", num(m.seconds)},
          {"alloc_seconds", num(m.alloc_seconds)},
          {"compute_call_seconds", num(m.compute_call_seconds)},
          {"sync_seconds", num(m.sync_seconds)},
          {"harness_seconds", num(m.harness_seconds)},
          {"event_generation_seconds", num(m.event_generation_seconds)},
          {"modeled_call_seconds", num(m.modeled_call_seconds)},
          {"steps_per_s", num(m.steps_per_s)},
          {"tokens_per_s", num(m.tokens_per_s)},
          {"padded_tokens_per_s", num(m.padded_tokens_per_s)},
          {"first_oom", m.first_oom ? oom_record_json(*m.first_oom) : json(nullptr)},
          {"peak_active_bytes", m.peak_active_bytes ? json(*m.peak_active_bytes) : json(nullptr)},
          {"free_space_at_peak_reserved", free_space_json(m.free_space_at_peak_reserved)},
          {"free_space_at_first_oom", free_space_json(m.free_space_at_first_oom)}};
}
RunMetrics run_from(const json& j) {
  RunMetrics m;
  m.peak_reserved_bytes = j.at("peak_reserved_bytes").get<Bytes>();
  m.peak_allocated_bytes = j.at("peak_allocated_bytes").get<Bytes>();
  m.fragmentation = num_of(j.at("fragmentation"));
  m.peak_reserved_sampled_bytes = j.at("peak_reserved_sampled_bytes").get<Bytes>();
  m.allocated_at_peak_reserved_bytes = j.at("allocated_at_peak_reserved_bytes").get<Bytes>();
  m.steps_completed = j.at("steps_completed").get<std::uint64_t>();
  m.events = j.at("events").get<std::uint64_t>();
  m.allocs = j.at("allocs").get<std::uint64_t>();
  m.frees = j.at("frees").get<std::uint64_t>();
  m.cache_hits = j.at("cache_hits").get<std::uint64_t>();
  m.device_allocs = j.at("device_allocs").get<std::uint64_t>();
  m.device_frees = j.at("device_frees").get<std::uint64_t>();
  m.ooms = j.at("ooms").get<std::uint64_t>();
  m.fragmentation_ooms = j.at("fragmentation_ooms").get<std::uint64_t>();
  m.capacity_ooms = j.at("capacity_ooms").get<std::uint64_t>();
  m.seconds = num_of(j.at("seconds"));
  m.alloc_seconds = num_of(j.at("alloc_seconds"));
  m.compute_call_seconds = num_of(j.at("compute_call_seconds"));
  m.sync_seconds = num_of(j.at("sync_seconds"));
  m.harness_seconds = num_of(j.at("harness_seconds"));
  m.event_generation_seconds = num_of(j.at("event_generation_seconds"));
  m.modeled_call_seconds = num_of(j.at("modeled_call_seconds"));
  m.steps_per_s = num_of(j.at("steps_per_s"));
  m.tokens_per_s = num_of(j.at("tokens_per_s"));
  m.padded_tokens_per_s = num_of(j.at("padded_tokens_per_s"));
  if (!j.at("first_oom").is_null()) m.first_oom = oom_record_from(j.at("first_oom"));
  if (j.contains("peak_active_bytes") && !j.at("peak_active_bytes").is_null())
    m.peak_active_bytes = j.at("peak_active_bytes").get<Bytes>();
  m.free_space_at_peak_reserved = free_space_from(j, "free_space_at_peak_reserved");
  m.free_space_at_first_oom = free_space_from(j, "free_space_at_first_oom");
  return m;
}

json need_json(const WorkloadNeed& n) {
  return {{"peak_requested_bytes", n.peak_requested_bytes},
          {"peak_requested_step", n.peak_requested_step},
          {"peak_requested_event", n.peak_requested_event},
          {"peak_rounded_bytes", n.peak_rounded_bytes},
          {"peak_rounded_step", n.peak_rounded_step},
          {"peak_rounded_event", n.peak_rounded_event},
          {"steps", n.steps},
          {"events", n.events},
          {"step_peak_requested_bytes", n.step_peak_requested_bytes},
          {"requested_from_step_bytes", n.requested_from_step_bytes}};
}
WorkloadNeed need_from(const json& j) {
  WorkloadNeed n;
  n.peak_requested_bytes = j.at("peak_requested_bytes").get<Bytes>();
  n.peak_requested_step = j.at("peak_requested_step").get<std::uint64_t>();
  n.peak_requested_event = j.at("peak_requested_event").get<std::uint64_t>();
  n.peak_rounded_bytes = j.at("peak_rounded_bytes").get<Bytes>();
  n.peak_rounded_step = j.at("peak_rounded_step").get<std::uint64_t>();
  n.peak_rounded_event = j.at("peak_rounded_event").get<std::uint64_t>();
  n.steps = j.at("steps").get<std::uint64_t>();
  n.events = j.at("events").get<std::uint64_t>();
  n.step_peak_requested_bytes = j.at("step_peak_requested_bytes").get<std::vector<Bytes>>();
  n.requested_from_step_bytes = j.at("requested_from_step_bytes").get<std::vector<Bytes>>();
  return n;
}

json segments_json(const std::vector<SegmentInfo>& segments) {
  json out = json::array();
  for (const auto& s : segments) {
    json blocks = json::array();
    for (const auto& b : s.blocks) blocks.push_back(json::array({b.offset, b.size, b.allocated, b.mapped}));
    out.push_back({{"address", s.address}, {"size", s.size}, {"stream", s.stream}, {"pool", s.pool}, {"blocks", blocks}});
  }
  return out;
}
std::vector<SegmentInfo> segments_from(const json& j) {
  std::vector<SegmentInfo> out;
  for (const auto& s : j) {
    SegmentInfo seg;
    seg.address = s.at("address").get<DevPtr>();
    seg.size = s.at("size").get<Bytes>();
    seg.stream = s.at("stream").get<StreamId>();
    seg.pool = s.at("pool").get<std::string>();
    for (const auto& b : s.at("blocks"))
      seg.blocks.push_back({b.at(0).get<Bytes>(), b.at(1).get<Bytes>(), b.at(2).get<bool>(), b.at(3).get<bool>()});
    out.push_back(std::move(seg));
  }
  return out;
}

// Rows of numbers as arrays (a timeline may have millions): [event, "a"|"f"|"r", id, bytes,
// allocated, reserved, segments, oom].
json timeline_json(const std::vector<TimelineRow>& rows) {
  json out = json::array();
  for (const auto& r : rows)
    out.push_back(json::array({r.event, std::string(1, r.action), r.id, r.bytes, r.allocated_bytes, r.reserved_bytes,
                               r.segments, r.oom}));
  return out;
}
std::vector<TimelineRow> timeline_from(const json& j) {
  std::vector<TimelineRow> out;
  out.reserve(j.size());
  for (const auto& r : j) {
    const std::string action = r.at(1).get<std::string>();
    if (action != "a" && action != "f" && action != "r") throw CaseFileError("a timeline row of unknown action '" + action + "'");
    out.push_back({r.at(0).get<std::uint64_t>(), action[0], r.at(2).get<std::uint64_t>(), r.at(3).get<Bytes>(),
                   r.at(4).get<Bytes>(), r.at(5).get<Bytes>(), r.at(6).get<std::uint64_t>(), r.at(7).get<bool>()});
  }
  return out;
}

json steps_json(const std::vector<StepSample>& steps) {
  json out = json::array();
  for (const auto& s : steps)
    out.push_back(json::array({s.step, s.allocated_bytes, s.reserved_bytes, s.peak_allocated_bytes,
                               s.peak_reserved_bytes, s.ooms, s.step_peak_allocated_bytes, s.step_peak_reserved_bytes,
                               s.need_bytes, s.peak_reserved_sampled_bytes, s.allocated_at_peak_reserved_bytes}));
  return out;
}
std::vector<StepSample> steps_from(const json& j) {
  std::vector<StepSample> out;
  out.reserve(j.size());
  for (const auto& s : j) {
    if (s.size() != 11) throw CaseFileError("a step row without its 11 fields");
    out.push_back({s[0].get<std::uint64_t>(), s[1].get<Bytes>(), s[2].get<Bytes>(), s[3].get<Bytes>(),
                   s[4].get<Bytes>(), s[5].get<std::uint64_t>(), s[6].get<Bytes>(), s[7].get<Bytes>(),
                   s[8].get<Bytes>(), s[9].get<Bytes>(), s[10].get<Bytes>()});
  }
  return out;
}

json usage_json(const std::vector<UsageSample>& usage) {
  json out = json::array();
  for (const auto& u : usage) out.push_back(json::array({u.event, u.step, u.allocated_bytes, u.reserved_bytes}));
  return out;
}
std::vector<UsageSample> usage_from(const json& j) {
  std::vector<UsageSample> out;
  out.reserve(j.size());
  for (const auto& u : j)
    out.push_back({u.at(0).get<std::uint64_t>(), u.at(1).get<std::uint64_t>(), u.at(2).get<Bytes>(), u.at(3).get<Bytes>()});
  return out;
}

}  // namespace

json device_info_json(const DeviceInfo& d) {
  return {{"kind", d.kind == DeviceKind::Sim ? "sim" : "cuda"},
          {"name", d.name},
          {"capacity_bytes", d.capacity_bytes},
          {"total_bytes", d.total_bytes},
          {"ballast_bytes", d.ballast_bytes},
          {"page_bytes", d.page_bytes},
          {"driver", d.driver}};
}

DeviceInfo device_info_from_json(const json& j) {
  DeviceInfo d;
  d.kind = j.at("kind").get<std::string>() == "sim" ? DeviceKind::Sim : DeviceKind::Cuda;
  d.name = j.at("name").get<std::string>();
  d.capacity_bytes = j.at("capacity_bytes").get<Bytes>();
  d.total_bytes = j.at("total_bytes").get<Bytes>();
  d.ballast_bytes = j.at("ballast_bytes").get<Bytes>();
  d.page_bytes = j.at("page_bytes").get<Bytes>();
  d.driver = j.at("driver").get<std::string>();
  return d;
}

namespace {

// What case_file_text puts in place of the usage window, then replaces: a string no result holds
// (control characters are written escaped, so its text is exactly this).
constexpr const char* kUsageMarker = "\u0001oom_usage\u0001";
constexpr const char* kUsageMarkerText = "\"oom_usage\":\"\\u0001oom_usage\\u0001\"";

json case_result_json_with(const CaseResult& c, json usage) {
  json runs = json::array();
  for (const auto& m : c.runs) runs.push_back(run_json(m));
  json oom_events = json::array();
  for (const auto& o : c.oom_events) oom_events.push_back(oom_record_json(o));
  json stats = json::array();
  for (const auto& [name, value] : c.memory_stats) stats.push_back(json::array({name, value}));
  json j{{"label", c.label},
         {"workload", c.workload},
         {"workload_label", c.workload_label},
         {"allocator", c.allocator},
         {"allocator_label", c.allocator_label},
         {"options", c.options},
         {"need", c.need ? need_json(*c.need) : json(nullptr)},
         {"capacity_bytes", c.capacity_bytes},
         {"capacity_requested_bytes", c.capacity_requested_bytes},
         {"ballast_bytes", c.ballast_bytes},
         {"throughput_modeled", c.throughput_modeled},
         {"memory_modeled", c.memory_modeled},
         {"runs", runs},
         {"timeline", timeline_json(c.timeline)},
         {"steps", steps_json(c.steps)},
         {"memory_stats", stats},
         {"memory_summary", c.memory_summary},
         {"oom_segments", segments_json(c.oom_segments)},
         {"oom_events", oom_events},
         {"oom_usage_window_events", c.oom_usage_window_events},
         {"oom_usage", std::move(usage)},
         {"recorded_ooms", nullptr},
         {"workload_notes", c.workload_notes},
         {"error", c.error}};
  if (c.recorded_ooms)
    j["recorded_ooms"] = {{"count", c.recorded_ooms->count},
                          {"events", c.recorded_ooms->events},
                          {"whole_trace", c.recorded_ooms->whole_trace}};
  j["gpu"] = c.gpu ? case_gpu_json(*c.gpu) : json(nullptr);
  return j;
}

}  // namespace

json case_result_json(const CaseResult& c) { return case_result_json_with(c, usage_json(c.oom_usage)); }

CaseResult case_result_from_json(const json& j) {
  try {
    CaseResult c;
    c.label = j.at("label").get<std::string>();
    c.workload = j.at("workload").get<std::string>();
    c.workload_label = j.at("workload_label").get<std::string>();
    c.allocator = j.at("allocator").get<std::string>();
    c.allocator_label = j.at("allocator_label").get<std::string>();
    c.options = j.at("options").get<AllocatorOptions>();
    if (!j.at("need").is_null()) c.need = std::make_shared<const WorkloadNeed>(need_from(j.at("need")));
    c.capacity_bytes = j.at("capacity_bytes").get<Bytes>();
    c.capacity_requested_bytes = j.at("capacity_requested_bytes").get<Bytes>();
    c.ballast_bytes = j.at("ballast_bytes").get<Bytes>();
    c.throughput_modeled = j.at("throughput_modeled").get<bool>();
    c.memory_modeled = j.at("memory_modeled").get<bool>();
    for (const auto& r : j.at("runs")) c.runs.push_back(run_from(r));
    c.timeline = timeline_from(j.at("timeline"));
    c.steps = steps_from(j.at("steps"));
    for (const auto& s : j.at("memory_stats"))
      c.memory_stats.emplace_back(s.at(0).get<std::string>(), s.at(1).get<std::int64_t>());
    c.memory_summary = j.at("memory_summary").get<std::string>();
    c.oom_segments = segments_from(j.at("oom_segments"));
    for (const auto& o : j.at("oom_events")) c.oom_events.push_back(oom_record_from(o));
    c.oom_usage_window_events = j.at("oom_usage_window_events").get<std::uint64_t>();
    c.oom_usage = usage_from(j.at("oom_usage"));
    if (!j.at("recorded_ooms").is_null()) {
      const json& r = j.at("recorded_ooms");
      c.recorded_ooms = RecordedOoms{r.at("count").get<std::uint64_t>(), r.at("events").get<std::vector<std::uint64_t>>(),
                                     r.at("whole_trace").get<bool>()};
    }
    c.workload_notes = j.at("workload_notes").get<std::vector<std::string>>();
    c.error = j.at("error").get<std::string>();
    if (j.contains("gpu") && !j.at("gpu").is_null()) {  // added with sweeps over several GPUs
      const json& g = j.at("gpu");
      c.gpu = CaseGpu{g.at("name").get<std::string>(), g.at("uuid").get<std::string>(),
                      g.at("visible_devices").get<std::string>(), g.at("free_bytes_before").get<Bytes>(),
                      g.at("total_bytes").get<Bytes>()};
    }
    return c;
  } catch (const json::exception& e) {
    throw CaseFileError(fmt::format("not a case result of this version: {}", e.what()));
  }
}

json case_gpu_json(const CaseGpu& g) {
  return {{"name", g.name},
          {"uuid", g.uuid},
          {"visible_devices", g.visible_devices},
          {"free_bytes_before", g.free_bytes_before},
          {"total_bytes", g.total_bytes}};
}

namespace {
json case_file_json_with(const CaseFileHeader& h, const CaseResult& result, json usage) {
  return {{"format", kCaseFileFormat},
          {"plan_index", h.plan_index},
          {"plan_cases", h.plan_cases},
          {"baseline", h.baseline},
          {"formats", h.formats},
          {"metrics", h.metrics},
          {"id", h.id},
          {"spec", h.spec},
          {"tool_version", h.tool_version},
          {"config_name", h.config_name},
          {"config_path", h.config_path},
          {"command_line", h.command_line},
          {"started_at", h.started_at},
          {"finished_at", h.finished_at},
          {"device", device_info_json(h.device)},
          {"result", case_result_json_with(result, std::move(usage))}};
}
}  // namespace

json case_file_json(const CaseFileHeader& h, const CaseResult& result) {
  return case_file_json_with(h, result, usage_json(result.oom_usage));
}

std::string case_file_text(const CaseFileHeader& h, const CaseResult& result) {
  if (result.oom_usage.empty()) return json_text(case_file_json(h, result));
  const std::string text = json_text(case_file_json_with(h, result, kUsageMarker));
  const std::size_t at = text.find(kUsageMarkerText);
  // The marker is the usage's own key and value, once; were it anywhere else, the slow way.
  if (at == std::string::npos || text.find(kUsageMarkerText, at + 1) != std::string::npos)
    return json_text(case_file_json(h, result));
  const std::size_t tail = at + std::char_traits<char>::length(kUsageMarkerText);
  std::string out(text, 0, at);
  out += "\"oom_usage\":[";  // as json::dump writes an array of arrays of numbers, compact
  // Written in place: a row is at most four 20-digit numbers, 3 commas, its brackets and a comma.
  const std::size_t start = out.size();
  out.resize(start + 86 * result.oom_usage.size());
  char* p = out.data() + start;
  auto put = [&p](std::uint64_t v, char after) { put_decimal(p, v, after); };
  for (const UsageSample& u : result.oom_usage) {
    if (&u != &result.oom_usage.front()) *p++ = ',';
    *p++ = '[';
    put(u.event, ',');
    put(u.step, ',');
    put(u.allocated_bytes, ',');
    put(u.reserved_bytes, ']');
  }
  out.resize(std::size_t(p - out.data()));
  out += ']';
  out.append(text, tail, std::string::npos);
  return out;
}

LoadedCase read_case_file(const std::string& path) {
  std::string text;
  try {
    text = read_file_bounded(path, std::size_t(4) << 30);
  } catch (const BoundedReadError& e) {
    throw CaseFileError(fmt::format("{}: {}", path, e.what()));
  }
  try {
    const json j = json::parse(text);
    if (!j.is_object() || j.value("format", 0) != kCaseFileFormat)
      throw CaseFileError(fmt::format("not a case file of format {}", kCaseFileFormat));
    LoadedCase c;
    c.header.id = j.at("id").get<std::string>();
    c.header.spec = j.at("spec");
    c.header.tool_version = j.at("tool_version").get<std::string>();
    c.header.config_name = j.at("config_name").get<std::string>();
    c.header.config_path = j.at("config_path").get<std::string>();
    c.header.command_line = j.at("command_line").get<std::string>();
    c.header.started_at = j.at("started_at").get<std::string>();
    c.header.finished_at = j.at("finished_at").get<std::string>();
    c.header.device = device_info_from_json(j.at("device"));
    c.header.plan_index = j.value("plan_index", std::size_t(0));  // added with sweeps: absent in older files
    c.header.plan_cases = j.value("plan_cases", std::size_t(0));
    c.header.baseline = j.value("baseline", std::string());
    c.header.formats = j.value("formats", std::vector<std::string>());
    c.header.metrics = j.value("metrics", std::vector<std::string>());
    c.result = case_result_from_json(j.at("result"));
    return c;
  } catch (const json::exception& e) {
    throw CaseFileError(fmt::format("{}: not a case file: {}", path, e.what()));
  } catch (const CaseFileError& e) {
    throw CaseFileError(fmt::format("{}: {}", path, e.what()));
  }
}

std::string case_file_path(const std::string& dir, const std::string& id) {
  return (std::filesystem::path(dir) / "cases" / (id + ".json")).string();
}

}  // namespace gmb
