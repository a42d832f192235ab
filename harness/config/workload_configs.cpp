// YAML -> workload parameters, one parser per workload kind.

#include <algorithm>

#include <fmt/format.h>

#include "common/text_excerpt.h"
#include "common/units.h"
#include "harness/config/config.h"
#include "harness/run/snapshot_check.h"
#include "workloads/hole_pattern.h"
#include "workloads/pytorch_snapshot.h"
#include "workloads/trace.h"

namespace gmb {

WorkloadSpec parse_transformer_workload(const YamlReader&, const YAML::Node&, const std::string&,
                                        const std::string&);
std::vector<std::string> transformer_keys();

namespace {

WorkloadSpec parse_hole_pattern(const YamlReader& y, const YAML::Node& n, const std::string& key,
                                const std::string&) {
  HolePatternParams p;
  if (n["sizes"]) p.sizes = y.sizes(n["sizes"], key + ".sizes");
  if (n["free"]) {
    const YAML::Node f = n["free"];
    std::vector<YAML::Node> items;
    if (f.IsScalar()) items.push_back(f);
    else if (f.IsSequence()) for (std::size_t i = 0; i < f.size(); ++i) items.push_back(f[i]);
    else y.fail(f, key + ".free", "expected an index or a list of indices into sizes");
    p.free_indices.clear();
    for (std::size_t i = 0; i < items.size(); ++i) {
      std::string k = fmt::format("{}.free[{}]", key, i);
      auto idx = y.count(items[i], k);
      if (idx >= p.sizes.size())
        y.fail(items[i], k, fmt::format("index {} is out of range: sizes has {} entries (valid: 0 to {})",
                                        idx, p.sizes.size(), p.sizes.size() - 1));
      for (auto prev : p.free_indices)
        if (prev == idx) y.fail(items[i], k, fmt::format("index {} is freed twice", idx));
      p.free_indices.push_back(idx);
    }
  }
  if (n["probe"]) p.probes = y.sizes(n["probe"], key + ".probe");
  if (n["repeat"]) p.repeat = y.count(n["repeat"], key + ".repeat", 1, 100'000'000);  // as transformer steps
  return {"hole_pattern", [p] { return make_hole_pattern(p); }, {}, {}, {}, {}, {}};
}

WorkloadSpec parse_trace(const YamlReader& y, const YAML::Node& n, const std::string& key,
                         const std::string& config_dir) {
  if (!n["path"]) y.fail(n, key + ".path", "missing: the trace file to replay");
  std::string path = y.string(n["path"], key + ".path");
  if (path.empty()) y.fail(n["path"], key + ".path", "empty: give the trace file to replay");
  path = beside_config(path, config_dir);
  WorkloadSpec spec{"trace", nullptr, {}, {}, {}, {path}, {}};
  try {
    // The format and the start of the file are checked now; the rest as it replays (a snapshot
    // is read whole now, once for every case).
    auto source = open_trace(path);
    spec.make = trace_workload_factory(path, {}, *source);
    for (const auto& line : describe(source->meta())) spec.notes.push_back(fmt::format("trace {}: {}", path, line));
    const PyTorchSnapshot* snapshot = pytorch_snapshot_of(*source);
    spec.recorded_device = std::max(source->meta().recorded_device, 0);
    if (snapshot && snapshot->has_alloc_conf && !snapshot->alloc_conf_error.empty()) {
      spec.notes.push_back(fmt::format("trace {}: the recorded allocator settings cannot be read ({}): no caching "
                                       "entry replays the recorded run, each is a what-if",
                                       path, snapshot->alloc_conf_error));
    } else if (snapshot && snapshot->has_alloc_conf) {
      std::string stale_conf_note;
      const std::string recorded = recorded_alloc_conf(source->meta(), &stale_conf_note);
      if (!stale_conf_note.empty()) spec.notes.push_back(fmt::format("trace {}: {}", path, stale_conf_note));
      spec.has_recorded_alloc_conf = true;
      spec.recorded_alloc_conf = recorded;
      spec.recorded_placements = recorded_placements(*snapshot);
      spec.notes.push_back(
          recorded.empty()
              ? fmt::format("trace {}: the recorded allocator settings are PyTorch's defaults: a caching entry without "
                            "alloc_conf (or with one of the same effect) replays the recorded run (segments where the "
                            "driver put them, as replay does); other settings are what-ifs",
                            path)
              : fmt::format("trace {}: the recorded allocator settings \"{}\": a caching entry with these as its "
                            "alloc_conf (or others of the same effect) replays the recorded run (segments where the "
                            "driver put them, as replay does); other settings, and a caching entry without alloc_conf "
                            "(PyTorch's defaults), are what-ifs",
                            path, printable_text(recorded)));
    }
  } catch (const TraceError& e) {
    y.fail(n["path"], key + ".path", e.what());
  }
  if (n["memory_limit"]) {
    spec.memory_limit_bytes = y.size(n["memory_limit"], key + ".memory_limit", /*allow_zero=*/false);
    spec.notes.push_back(fmt::format("trace {}: memory limit {} (memory_limit): the caching allocator's, as "
                                     "set_per_process_memory_fraction sets it; the other allocators have the device",
                                     path, format_bytes(spec.memory_limit_bytes)));
  }
  return spec;
}

}  // namespace

const std::vector<WorkloadKind>& workload_kinds() {
  static const std::vector<WorkloadKind> kinds = {
      {"hole_pattern", {"sizes", "free", "probe", "repeat"}, parse_hole_pattern},
      {"trace", {"path", "memory_limit"}, parse_trace},
      {"transformer", transformer_keys(), parse_transformer_workload},
  };
  return kinds;
}

}  // namespace gmb
