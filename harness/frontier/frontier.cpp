#include "harness/frontier/frontier.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "allocators/registry.h"
#include "common/units.h"
#include "harness/report/oom_json.h"
#include "harness/report/report.h"
#include "harness/run/workload_need.h"
#include "workloads/transformer.h"
#include "harness/run/json_text.h"

namespace gmb {

BisectResult bisect_frontier(FrontierDirection direction, std::uint64_t lo, std::uint64_t hi,
                             std::uint64_t resolution, const std::function<bool(std::uint64_t)>& passes) {
  if (resolution == 0) resolution = 1;
  if (hi < lo) std::swap(lo, hi);
  // The values probed: the grid lo + k * resolution below hi, and hi itself (never past it, so
  // the answer stays in [lo, hi] and nothing is computed beyond hi: no wrap near 2^64).
  std::map<std::uint64_t, bool> seen;
  auto ok = [&](std::uint64_t v) {
    auto it = seen.find(v);
    if (it != seen.end()) return it->second;
    return seen[v] = passes(v);
  };
  BisectResult r;
  // The easy end: nothing passes if it fails. The hard end: the frontier is there if it passes.
  const bool smallest = direction == FrontierDirection::SmallestPassing;
  std::uint64_t easy = smallest ? hi : lo, hard = smallest ? lo : hi;
  if (!ok(easy)) {
    r.fail = easy;
    return r;
  }
  if (easy == hard || ok(hard)) {
    r.pass = hard;
    return r;
  }
  // Invariant: `easy` passes, `hard` fails; they close in until one grid step apart.
  while ((easy > hard ? easy - hard : hard - easy) > resolution) {
    std::uint64_t a = std::min(easy, hard), b = std::max(easy, hard);
    std::uint64_t mid = a + std::max<std::uint64_t>((b - a) / resolution / 2, 1) * resolution;
    (ok(mid) ? easy : hard) = mid;
  }
  r.pass = easy;
  r.fail = hard;
  return r;
}

const FrontierProbe* FrontierRow::probe(std::uint64_t value) const {
  for (const auto& p : probes)
    if (p.value == value) return &p;
  return nullptr;
}

std::optional<std::pair<std::uint64_t, std::uint64_t>> FrontierRow::contradiction(FrontierDirection direction) const {
  const bool smallest = direction == FrontierDirection::SmallestPassing;
  // First the frontier itself against the nearest failure beyond it (the claim a user relies on).
  if (frontier) {
    std::optional<std::uint64_t> nearest;
    for (const FrontierProbe& f : probes)
      if (!f.passed && f.error.empty() && (smallest ? f.value > *frontier : f.value < *frontier) &&
          (!nearest || (smallest ? f.value < *nearest : f.value > *nearest)))
        nearest = f.value;
    if (nearest) return std::make_pair(*frontier, *nearest);
  }
  for (const FrontierProbe& p : probes)
    if (p.passed)
      for (const FrontierProbe& f : probes)
        if (!f.passed && f.error.empty() &&
            (smallest ? p.value < f.value : p.value > f.value))
          return std::make_pair(p.value, f.value);
  return std::nullopt;
}

namespace {

bool is_capacity(const FrontierSpec& s) { return s.param == "capacity"; }

}  // namespace

// Capacities exactly (a frontier 2 MiB from its neighbour must not print as the same value).
std::string frontier_value_text(const std::string& param, std::uint64_t v) {
  if (param != "capacity") return std::to_string(v);
  if (v % MiB == 0) return fmt::format("{} MiB", v / MiB);
  return fmt::format("{:.2f} MiB", double(v) / double(MiB));
}

namespace {

std::string value_text(const std::string& param, std::uint64_t v) { return frontier_value_text(param, v); }

// The largest capacity a search may try: the whole card on cuda, 1 TiB on sim.
Bytes device_limit(DeviceChoice choice) {
  if (resolve_device(choice) != DeviceChoice::Cuda) return 1024 * GiB;
  return cuda_device_info().capacity_bytes;  // the free memory: nothing is allocated to ask
}

struct Searcher {
  const Config& config;
  const FrontierSpec& spec;
  DeviceChoice device;
  const FrontierProgress& progress;
  // A capacity search runs the same workload again and again: its need is computed once.
  std::map<const WorkloadSpec*, std::shared_ptr<const WorkloadNeed>> needs{};

  std::shared_ptr<const WorkloadNeed> need_of(const WorkloadSpec& w) {
    auto& n = needs[&w];
    if (!n) {
      auto workload = w.make();
      n = std::make_shared<const WorkloadNeed>(compute_workload_need(*workload, config.run.max_steps));
    }
    return n;
  }

  FrontierProbe probe(FrontierRow& row, const AllocatorSpec& a, const WorkloadSpec& w, Bytes capacity,
                      std::uint64_t value) {
    FrontierProbe p;
    p.value = value;
    CaseSpec cs{a.name, case_options(a, w), w.make};
    DeviceSpec ds{device, capacity};
    ds.ordinal = w.recorded_device;
    if (is_capacity(spec)) {
      ds.capacity_bytes = value;
      cs.need = need_of(w);
    } else {
      std::string param = spec.param;
      const WorkloadSpec* wp = &w;
      cs.make_workload = [wp, param, value] { return wp->make_with(param, value); };
    }
    RunSettings settings = case_settings(config.run, a, w);
    settings.on_oom = OnOom::Stop;  // the first OOM settles the probe
    settings.repeat = 1;
    settings.timeline = false;
    settings.oom_block_map = false;
    try {
      CaseResult r = run_case(cs, ds, settings);
      p.error = r.error;
      p.capacity_bytes = r.capacity_bytes;
      if (!r.runs.empty()) {
        const RunMetrics& m = r.runs.front();
        p.oom = m.first_oom;
        p.peak_reserved_bytes = m.peak_reserved_bytes;
        p.peak_allocated_bytes = m.peak_allocated_bytes;
        p.steps_completed = m.steps_completed;
      }
      p.passed = p.error.empty() && !p.oom && !r.runs.empty();
    } catch (const std::invalid_argument& e) {  // a value the workload cannot take
      p.error = e.what();
    }
    row.probes.push_back(p);
    if (progress) progress(row, row.probes.back());
    return p;
  }

  FrontierRow search(const AllocatorSpec& a, const WorkloadSpec& w, Bytes capacity) {
    FrontierRow row;
    row.allocator = a.name;
    row.allocator_label = a.display_label();
    row.workload_label = w.make()->label();
    row.capacity_bytes = is_capacity(spec) ? 0 : capacity;
    if (const AllocatorOptions o = case_options(a, w); o.count("memory_limit_bytes"))
      row.memory_limit_bytes = std::stoull(o.at("memory_limit_bytes"));
    const std::uint64_t res =
        spec.resolution ? spec.resolution : is_capacity(spec) ? std::uint64_t(2 * MiB) : std::uint64_t(1);
    bool stopped = false;
    auto passes = [&](std::uint64_t v) {
      if (stopped) return false;
      if (const FrontierProbe* done = row.probe(v)) return done->passed;
      FrontierProbe p = probe(row, a, w, capacity, v);
      // A device error ends the search; a value the workload cannot take counts as failing.
      if (!p.error.empty() && is_capacity(spec)) {
        row.error = p.error;
        stopped = true;
      }
      return p.passed;
    };
    std::uint64_t lo = spec.lo, hi = spec.hi;
    if (is_capacity(spec)) {
      const Bytes limit = device_limit(device);
      if (!hi) {
        // Start at the configured capacity (else the device's size) and double until it passes.
        hi = std::min<Bytes>(config.device.capacity_bytes ? config.device.capacity_bytes : limit, limit);
        hi = (hi + res - 1) / res * res;
        while (!passes(hi) && !stopped && hi < limit) hi = std::min<Bytes>(hi * 2, limit);
      }
      if (!lo && !stopped) {
        // Every allocator needs at least the peak of the bytes allocated at once.
        if (passes(hi)) {
          const FrontierProbe* top = row.probe(hi);
          lo = std::max<Bytes>(top->peak_allocated_bytes / res * res, res);
        } else {
          lo = res;
        }
      }
    } else {
      auto it = std::find_if(w.params.begin(), w.params.end(), [&](auto& kv) { return kv.first == spec.param; });
      const std::uint64_t start = it->second;
      if (!lo) lo = 1;
      if (!hi) {
        // From the configured value, double until it fails (or the value cannot be taken).
        hi = std::max(start, lo);
        while (passes(hi) && hi < (std::uint64_t(1) << 30)) hi *= 2;
      }
    }
    row.lo = lo;
    row.hi = hi;
    row.resolution = res;
    if (!stopped) {
      BisectResult b = bisect_frontier(is_capacity(spec) ? FrontierDirection::SmallestPassing
                                                         : FrontierDirection::LargestPassing,
                                       lo, hi, res, passes);
      if (!stopped) {
        row.frontier = b.pass;
        row.nearest_failure = b.fail;
      }
      // The assumption checked where a user relies on it: capacities above the frontier at
      // doubling distances (2 to 256 steps of the resolution; a card "with room" must not OOM),
      // and a few below (a pass there means the frontier is not the smallest). Each probe is
      // listed; a contradiction is reported with the table (FrontierRow::contradiction).
      if (is_capacity(spec) && b.pass && !stopped) {
        for (int k = 1; k <= 8 && !stopped; ++k) {
          const std::uint64_t step = res << k;
          if (*b.pass > hi || step > hi - *b.pass) break;
          passes(*b.pass + step);
        }
        for (int k = 1; k <= 4 && !stopped; ++k) {
          const std::uint64_t step = res << k;
          if (*b.pass < lo || step > *b.pass - lo) break;
          passes(*b.pass - step);
        }
      }
    }
    return row;
  }
};

}  // namespace

FrontierReport run_frontier(const Config& config, const FrontierSpec& spec, DeviceChoice device,
                            std::optional<Bytes> capacity_override, const FrontierProgress& progress) {
  if (std::find(frontier_params().begin(), frontier_params().end(), spec.param) == frontier_params().end())
    throw std::invalid_argument(
        fmt::format("--param: '{}' is not a frontier parameter (valid: {})", spec.param, join(frontier_params())));
  if (spec.lo && spec.hi && spec.lo > spec.hi)
    throw std::invalid_argument(fmt::format("--lo ({}) is above --hi ({})", value_text(spec.param, spec.lo),
                                            value_text(spec.param, spec.hi)));
  if (spec.lo && spec.hi && spec.resolution && spec.resolution > std::max<std::uint64_t>(spec.hi - spec.lo, 1))
    throw std::invalid_argument(fmt::format("--resolution: {} is wider than the range [{}, {}] (valid: {} to {})",
                                            value_text(spec.param, spec.resolution), value_text(spec.param, spec.lo),
                                            value_text(spec.param, spec.hi), is_capacity(spec) ? "1 B" : "1",
                                            value_text(spec.param, std::max<std::uint64_t>(spec.hi - spec.lo, 1))));
  if (!is_capacity(spec))
    for (const auto& w : config.workloads) {
      bool has = std::any_of(w.params.begin(), w.params.end(), [&](auto& kv) { return kv.first == spec.param; });
      if (!has || !w.make_with) {
        std::string can;
        for (const auto& kv : w.params) can += (can.empty() ? "" : ", ") + kv.first;
        throw std::invalid_argument(fmt::format(
            "workload '{}' has no parameter '{}' to vary (it can vary: capacity{}{}); the transformer "
            "workload varies batch and seq_len",
            w.kind, spec.param, can.empty() ? "" : ", ", can));
      }
    }
  FrontierReport report;
  report.config_name = config.name;
  report.config_path = config.path;
  report.spec = spec;
  DeviceSpec ds = config.device;
  ds.choice = device;
  if (capacity_override) ds.capacity_bytes = *capacity_override;
  report.device = describe_device(ds);  // kind, name and driver: no device made (no ballast)
  std::vector<Bytes> capacities = {ds.capacity_bytes};
  if (!is_capacity(spec) && !capacity_override && config.capacities.size() > 1) capacities = config.capacities;
  Config cfg = config;
  if (capacity_override) cfg.device.capacity_bytes = *capacity_override;
  Searcher s{cfg, spec, device, progress};
  for (Bytes cap : capacities)
    for (const auto& w : config.workloads)
      for (const auto& a : config.allocators) report.rows.push_back(s.search(a, w, cap));
  return report;
}

nlohmann::json frontier_json(const FrontierReport& r) {
  using nlohmann::json;
  auto oom = [](const std::optional<OomRecord>& o) -> json { return o ? oom_record_json(*o) : json(nullptr); };
  json rows = json::array();
  for (const auto& row : r.rows) {
    json probes = json::array();
    for (const auto& p : row.probes) {
      json pj{{"value", p.value},
              {"passed", p.passed},
              {"capacity_bytes", p.capacity_bytes},
              {"peak_reserved_bytes", p.peak_reserved_bytes},
              {"peak_allocated_bytes", p.peak_allocated_bytes},
              {"steps_completed", p.steps_completed},
              {"oom", oom(p.oom)}};
      if (!p.error.empty()) pj["error"] = p.error;
      probes.push_back(pj);
    }
    json j{{"allocator", row.allocator_label},
           {"workload", row.workload_label},
           {"capacity_bytes", row.capacity_bytes},
           {"frontier", row.frontier ? json(*row.frontier) : json(nullptr)},
           {"nearest_failure", row.nearest_failure ? json(*row.nearest_failure) : json(nullptr)},
           {"lo", row.lo},
           {"hi", row.hi},
           {"resolution", row.resolution},
           {"probes", probes}};
    if (row.frontier)
      if (const FrontierProbe* p = row.probe(*row.frontier)) j["frontier_capacity_left_bytes"] = p->capacity_bytes;
    if (row.nearest_failure)
      if (const FrontierProbe* p = row.probe(*row.nearest_failure)) j["nearest_failure_oom"] = oom(p->oom);
    if (!row.error.empty()) j["error"] = row.error;
    if (const auto c = row.contradiction(is_capacity(r.spec) ? FrontierDirection::SmallestPassing
                                                              : FrontierDirection::LargestPassing))
      j["not_monotone"] = {{"passed_at", c->first}, {"failed_at", c->second}};
    rows.push_back(j);
  }
  return json{{"tool", {{"name", "gpumembench"}, {"version", r.tool_version}}},
              {"config", {{"name", r.config_name}, {"path", r.config_path}}},
              {"command", r.command_line},
              {"started_at", r.started_at},
              {"device", {{"kind", to_string(r.device.kind)}, {"name", r.device.name}, {"driver", r.device.driver}}},
              {"param", r.spec.param},
              {"direction", is_capacity(r.spec) ? "smallest passing" : "largest passing"},
              // As asked; null: chosen by the search for each row (the rows' lo, hi, resolution).
              {"lo", r.spec.lo ? json(r.spec.lo) : json(nullptr)},
              {"hi", r.spec.hi ? json(r.spec.hi) : json(nullptr)},
              {"resolution", r.spec.resolution ? json(r.spec.resolution) : json(nullptr)},
              {"memory_modeled_note", "on sim, allocators other than caching have modeled reserved memory"},
              {"rows", rows}};
}

namespace {

std::string failure_cell(const FrontierRow& row, const std::string& param) {
  if (!row.nearest_failure) return "none in range";
  const FrontierProbe* p = row.probe(*row.nearest_failure);
  if (!p) return value_text(param, *row.nearest_failure);
  if (p->oom)
    return fmt::format("{}: {} OOM at step {} ({} requested)", value_text(param, p->value), to_string(p->oom->kind),
                       p->oom->step, format_bytes(p->oom->requested_bytes));
  return fmt::format("{}: {}", value_text(param, p->value), p->error.empty() ? "failed" : p->error);
}

}  // namespace

std::string frontier_markdown(const FrontierReport& r) {
  const bool cap = is_capacity(r.spec);
  const bool sim = r.device.kind == DeviceKind::Sim;
  std::string out = fmt::format("OOM frontier of {} on {} ({}): {} {} that runs every step without an OOM\n\n",
                                r.config_name, r.device.name, to_string(r.device.kind),
                                cap ? "the smallest" : "the largest", r.spec.param);
  out += cap ? "| allocator | workload | smallest capacity without OOM | capacity left there | OOM just below | peak reserved there | probes |\n"
               "|---|---|---:|---:|---|---:|---:|\n"
             : fmt::format("| allocator | workload | capacity | largest {} without OOM | OOM just above | peak reserved there | probes |\n"
                           "|---|---|---:|---:|---|---:|---:|\n",
                           r.spec.param);
  bool modeled = false;
  for (const auto& row : r.rows) {
    const FrontierProbe* at = row.frontier ? row.probe(*row.frontier) : nullptr;
    const bool mm = memory_modeled(row.allocator, sim);
    modeled = modeled || mm;
    std::string front = row.error.empty() ? (row.frontier ? value_text(r.spec.param, *row.frontier) : "none in range")
                                          : "error: " + row.error;
    if (cap && row.error.empty() && !row.frontier && row.memory_limit_bytes)
      front += fmt::format(" (the allocator's memory limit, {}, from the trace's memory_limit, holds at every capacity)",
                           format_bytes(row.memory_limit_bytes));
    // In the capacities' unit (exact MiB), to be read against them.
    std::string peak = at ? value_text("capacity", at->peak_reserved_bytes) + (mm ? " (modeled)" : "") : "";
    if (cap)
      out += fmt::format("| {} | {} | {}{} | {} | {} | {} | {} |\n", row.allocator_label, row.workload_label, front,
                         mm && row.frontier ? " (modeled)" : "", at ? value_text("capacity", at->capacity_bytes) : "",
                         failure_cell(row, r.spec.param), peak, row.probes.size());
    else
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", row.allocator_label, row.workload_label,
                         row.capacity_bytes ? value_text("capacity", row.capacity_bytes) : "whole device", front,
                         failure_cell(row, r.spec.param), peak,
                         row.probes.size());
  }
  out += fmt::format("\nBisection at a resolution of {}; both the frontier and its failing neighbour were run.\n",
                     value_text(r.spec.param, r.spec.resolution ? r.spec.resolution
                                                                : cap ? std::uint64_t(2 * MiB) : std::uint64_t(1)));
  // The search's assumption, said, and where its own probes broke it.
  out += cap ? "The search assumes that more memory never causes an OOM. PyTorch's caching allocator can break "
               "that (its decisions depend on the capacity): a capacity above a frontier can still OOM, and one "
               "below it can pass; replay at the capacity you plan for.\n"
             : fmt::format("The search assumes that a larger {} never passes where a smaller one fails.\n", r.spec.param);
  const FrontierDirection dir = cap ? FrontierDirection::SmallestPassing : FrontierDirection::LargestPassing;
  for (const auto& row : r.rows)
    if (const auto c = row.contradiction(dir))
      out += fmt::format("- {} x {}: not monotone: passed at {}, OOM at {}{}.\n", row.allocator_label,
                         row.workload_label, value_text(r.spec.param, c->first), value_text(r.spec.param, c->second),
                         cap ? " (more memory)" : "");
  if (modeled)
    out += "(modeled): on the simulated device these allocators' reserved memory comes from a model of the driver.\n";
  return out;
}

std::string frontier_csv(const FrontierReport& r) {
  auto q = [](const std::string& s) {
    std::string e = "\"";
    for (char ch : s) e += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return e + "\"";
  };
  std::string out =
      "allocator,workload,device_kind,param,capacity_bytes,frontier,frontier_capacity_left_bytes,"
      "frontier_peak_reserved_bytes,nearest_failure,nearest_failure_oom_kind,nearest_failure_oom_step,probes,error\n";
  for (const auto& row : r.rows) {
    const FrontierProbe* at = row.frontier ? row.probe(*row.frontier) : nullptr;
    const FrontierProbe* bad = row.nearest_failure ? row.probe(*row.nearest_failure) : nullptr;
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", q(row.allocator_label), q(row.workload_label),
                       to_string(r.device.kind), r.spec.param, row.capacity_bytes ? std::to_string(row.capacity_bytes) : "",
                       row.frontier ? std::to_string(*row.frontier) : "", at ? std::to_string(at->capacity_bytes) : "",
                       at ? std::to_string(at->peak_reserved_bytes) : "",
                       row.nearest_failure ? std::to_string(*row.nearest_failure) : "",
                       bad && bad->oom ? to_string(bad->oom->kind) : "",
                       bad && bad->oom ? std::to_string(bad->oom->step) : "", row.probes.size(), q(row.error));
  }
  return out;
}

void write_frontier_reports(const FrontierReport& r, const std::string& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  write_file_atomically((fs::path(dir) / "frontier.json").string(), json_text(frontier_json(r), 2) + "\n");
  write_file_atomically((fs::path(dir) / "frontier.md").string(),
                        frontier_markdown(r) + "\nCommand: `" + r.command_line + "` (" + r.started_at + ")\n");
  write_file_atomically((fs::path(dir) / "frontier.csv").string(), frontier_csv(r));
}

}  // namespace gmb
