#include "harness/sweep/merge.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "harness/io/bounded_read.h"
#include "harness/run/case_file.h"

namespace gmb {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Found {
  LoadedCase loaded;
  std::string path, text;
};

// What two runs of one case may differ in: timings, and on a GPU the capacity measured after the
// ballast and the OOM message's text (PyTorch's quotes the free memory cudaMemGetInfo reports).
bool timing_key(const std::string& key) {
  return key.find("seconds") != std::string::npos || key.find("_per_s") != std::string::npos ||
         key == "capacity_bytes" || key == "ballast_bytes" || key == "message";
}

void strip_timings(json& v) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end();) {
      if (timing_key(it.key()))
        it = v.erase(it);
      else
        strip_timings(*it++);
    }
  } else if (v.is_array()) {
    for (auto& x : v) strip_timings(x);
  }
}

// The first place where two JSON values differ, as a path ("runs/0/peak_reserved_bytes").
std::string first_difference(const json& a, const json& b, const std::string& at = "") {
  if (a.type() != b.type()) return at.empty() ? "(the whole result)" : at;
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string here = at.empty() ? it.key() : at + "/" + it.key();
      if (!b.contains(it.key())) return here;
      if (a[it.key()] != b[it.key()]) return first_difference(a[it.key()], b[it.key()], here);
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) return at.empty() ? it.key() : at + "/" + it.key();
  } else if (a.is_array()) {
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      if (a[i] != b[i]) return first_difference(a[i], b[i], at + "/" + std::to_string(i));
    if (a.size() != b.size()) return at + " (length)";
  }
  return at.empty() ? "(the whole result)" : at;
}

// One value of a header field over every file; a second one is a mix (first file of each kept).
struct Values {
  std::vector<std::pair<std::string, std::string>> seen;  // value, an example file
  void add(const std::string& value, const std::string& path) {
    for (const auto& s : seen)
      if (s.first == value) return;
    seen.emplace_back(value, path);
  }
  std::string text() const {
    std::string out;
    for (const auto& [value, path] : seen) out += fmt::format("{}\"{}\" (e.g. {})", out.empty() ? "" : ", ", value, path);
    return out;
  }
};

std::vector<Found> read_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw MergeError(fmt::format("{}: no such folder", dir));
  const fs::path cases = fs::path(dir) / "cases";
  if (!fs::is_directory(cases, ec))
    throw MergeError(fmt::format("{}: not the folder of a run (it has no cases/ folder)", dir));
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(cases, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".json" && name[0] != '.') paths.push_back(e.path());  // .name.tmp.pid: a write cut short
  }
  if (ec) throw MergeError(fmt::format("{}: cannot list the folder: {}", cases.string(), ec.message()));
  std::sort(paths.begin(), paths.end());
  std::vector<Found> out;
  for (const fs::path& p : paths) {
    Found f;
    f.path = p.string();
    try {
      f.loaded = read_case_file(f.path);
      f.text = read_file_bounded(f.path, std::size_t(4) << 30);
    } catch (const CaseFileError& e) {
      throw MergeError(e.what());
    } catch (const BoundedReadError& e) {
      throw MergeError(fmt::format("{}: {}", f.path, e.what()));
    }
    if (p.stem().string() != f.loaded.header.id || case_id(f.loaded.header.spec) != f.loaded.header.id)
      throw MergeError(fmt::format("{}: its id {} is not the hash of its spec (the file was changed or renamed)", f.path,
                                   f.loaded.header.id));
    out.push_back(std::move(f));
  }
  return out;
}

std::string join_dirs(const std::vector<std::string>& dirs) {
  std::string out;
  for (const auto& d : dirs) out += (out.empty() ? "" : ", ") + d;
  return out;
}

}  // namespace

json comparable_figures(const CaseResult& c) {
  json j = case_result_json(c);
  j.erase("gpu");
  strip_timings(j);
  return j;
}

MergeResult merge_case_folders(const std::vector<std::string>& dirs, const std::vector<PlannedCase>* plan,
                               bool allow_mixed) {
  MergeResult out;
  std::map<std::string, Found> by_id;
  std::vector<std::string> order;  // ids in the order first found
  std::size_t agreed = 0;
  for (const std::string& dir : dirs) {
    for (Found& f : read_folder(dir)) {
      const std::string id = f.loaded.header.id;
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        order.push_back(id);
        by_id.emplace(id, std::move(f));
        continue;
      }
      Found& kept = it->second;
      const bool kept_failed = !kept.loaded.result.error.empty(), this_failed = !f.loaded.result.error.empty();
      if (kept_failed != this_failed) {  // a case that could not run, and a run of it that could
        out.notes.push_back(fmt::format("{} could not run ({}); {} did: that one is kept",
                                        kept_failed ? kept.path : f.path,
                                        kept_failed ? kept.loaded.result.error : f.loaded.result.error,
                                        kept_failed ? f.path : kept.path));
        if (kept_failed) kept = std::move(f);
        continue;
      }
      const json a = comparable_figures(kept.loaded.result), b = comparable_figures(f.loaded.result);
      if (a == b) {
        ++agreed;
        continue;
      }
      const std::string at = first_difference(a, b);
      // On sim every figure is the allocator's own decision or the model's: a difference is a
      // wrong number. On a GPU the driver decides part of them (where cudaMalloc places a
      // segment, when a pool's frees complete), and two runs may differ slightly: said, not refused.
      if (kept.loaded.header.spec.at("device").at("kind") != "cuda")
        throw MergeError(fmt::format("{} and {} are the same case ({}) with different figures (first at {}): "
                                     "refusing to choose one",
                                     kept.path, f.path, kept.loaded.result.label, at));
      std::string values;
      if (kept.loaded.result.runs.size() == f.loaded.result.runs.size() && !f.loaded.result.runs.empty()) {
        const RunMetrics &x = kept.loaded.result.runs[0], &y = f.loaded.result.runs[0];
        values = fmt::format("; peak reserved {} and {} bytes, peak allocated {} and {}", x.peak_reserved_bytes,
                             y.peak_reserved_bytes, x.peak_allocated_bytes, y.peak_allocated_bytes);
      }
      out.notes.push_back(fmt::format("{} and {} are the same GPU case ({}) with figures that differ from run to run "
                                      "on the real driver (first at {}{}): the first kept",
                                      kept.path, f.path, kept.loaded.result.label, at, values));
    }
  }
  if (agreed)
    out.notes.push_back(fmt::format("{} case{} found in more than one folder with the same figures: the first kept", agreed,
                                    agreed == 1 ? "" : "s"));
  // The cases in the tables' order.
  std::vector<const Found*> chosen;
  if (plan) {
    std::set<std::string> planned;
    for (const PlannedCase& c : *plan) {
      planned.insert(c.id);
      auto it = by_id.find(c.id);
      if (it == by_id.end())
        out.missing.push_back(c.label);
      else
        chosen.push_back(&it->second);
    }
    const std::size_t others = std::count_if(order.begin(), order.end(), [&](auto& id) { return !planned.count(id); });
    if (others)
      out.notes.push_back(fmt::format("{} case file{} not of this config with these flags: left out", others,
                                      others == 1 ? " is" : "s are"));
  } else {
    std::map<std::string, std::size_t> config_rank;  // configs in the order first found
    for (const std::string& id : order) config_rank.emplace(by_id.at(id).loaded.header.config_name, config_rank.size());
    for (const std::string& id : order) chosen.push_back(&by_id.at(id));
    std::stable_sort(chosen.begin(), chosen.end(), [&](const Found* x, const Found* y) {
      const auto& hx = x->loaded.header;
      const auto& hy = y->loaded.header;
      return std::tuple(config_rank.at(hx.config_name), hx.plan_index, hx.id) <
             std::tuple(config_rank.at(hy.config_name), hy.plan_index, hy.id);
    });
    // The cases a plan of a known size has no file for.
    std::map<std::string, std::pair<std::size_t, std::set<std::size_t>>> of_config;
    for (const Found* f : chosen) {
      auto& entry = of_config[f->loaded.header.config_name];
      entry.first = std::max(entry.first, f->loaded.header.plan_cases);
      entry.second.insert(f->loaded.header.plan_index);
    }
    for (const auto& [name, entry] : of_config)
      for (std::size_t i = 0; i < entry.first; ++i)
        if (!entry.second.count(i))
          out.missing.push_back(fmt::format("case {} of the {} of {} (gpumembench plan --config ... lists them)", i,
                                            entry.first, name));
  }
  if (chosen.empty()) throw MergeError("no case files in " + join_dirs(dirs));
  // One tool version and one device, unless allowed.
  Values versions, kinds, devices, configs, baselines, formats, metrics;
  for (const Found* f : chosen) {
    const CaseFileHeader& h = f->loaded.header;
    versions.add(h.tool_version, f->path);
    kinds.add(h.spec.at("device").at("kind").get<std::string>(), f->path);
    devices.add(h.device.name, f->path);
    configs.add(h.config_name, f->path);
    baselines.add(h.baseline, f->path);
    std::string fs_text;
    for (const auto& x : h.formats) fs_text += (fs_text.empty() ? "" : ",") + x;
    formats.add(fs_text, f->path);
    std::string ms_text;
    for (const auto& x : h.metrics) ms_text += (ms_text.empty() ? "" : ",") + x;
    metrics.add(ms_text, f->path);
  }
  for (const auto& [what, values] : {std::pair<const char*, const Values*>{"tool versions", &versions},
                                     {"device kinds", &kinds},
                                     {"devices", &devices}}) {
    if (values->seen.size() < 2) continue;
    if (!allow_mixed)
      throw MergeError(fmt::format("the case files mix {}: {}; merge them apart, or give --allow-mixed to put them in "
                                   "one table",
                                   what, values->text()));
    out.notes.push_back(fmt::format("the cases mix {} (--allow-mixed): {}", what, values->text()));
  }
  if (configs.seen.size() > 1) out.notes.push_back("the cases come from several configs: " + configs.text());
  const CaseFileHeader& first = chosen.front()->loaded.header;
  RunReport& r = out.report;
  r.tool_version = first.tool_version;
  r.config_name = first.config_name;
  r.config_path = first.config_path;
  r.device = first.device;
  r.on_oom = first.spec.at("run").at("on_oom").get<std::string>();
  r.repeat = first.spec.at("run").at("repeat").get<std::uint64_t>();
  r.baseline = baselines.seen.size() == 1 ? first.baseline : "";
  if (formats.seen.size() == 1) out.formats = first.formats;
  // The runs' metric families when they agree; else the default ones (merge --metrics chooses).
  if (metrics.seen.size() == 1) r.metrics = first.metrics;
  for (const Found* f : chosen) {
    const json& spec = f->loaded.header.spec;
    if (spec.value("capacity_in_label", false)) {
      const Bytes cap = spec.at("device").at("capacity_bytes").get<Bytes>();
      if (std::find(r.capacity_sweep.begin(), r.capacity_sweep.end(), cap) == r.capacity_sweep.end())
        r.capacity_sweep.push_back(cap);
    }
    r.cases.push_back(f->loaded.result);
    out.files.push_back({f->loaded.header.id, f->path, f->text});
  }
  return out;
}

}  // namespace gmb
