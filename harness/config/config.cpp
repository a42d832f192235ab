#include "harness/config/config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include "allocators/caching/alloc_conf.h"
#include "allocators/registry.h"
#include "common/text_excerpt.h"
#include "common/units.h"  // parse_bool
#include "harness/io/bounded_read.h"
#include "harness/run/fragmentation_metrics.h"

namespace gmb {

const std::vector<std::string>& valid_formats() {
  static const std::vector<std::string> formats = {"md", "csv", "json", "latex"};
  return formats;
}

std::string AllocatorSpec::display_label() const { return label.empty() ? allocator_label(name, options) : label; }

AllocatorOptions case_options(const AllocatorSpec& allocator, const WorkloadSpec& workload) {
  AllocatorOptions options = allocator.options;
  if (workload.memory_limit_bytes && allocator_traits(allocator.name).accepts_alloc_conf &&
      !options.count("memory_limit_bytes"))
    options["memory_limit_bytes"] = std::to_string(workload.memory_limit_bytes);
  return options;
}

std::string beside_config(const std::string& path, const std::string& config_dir) {
  namespace fs = std::filesystem;
  if (fs::path(path).is_relative() && (fs::exists(fs::path(config_dir) / path) || !fs::exists(path)))
    return (fs::path(config_dir) / path).string();
  return path;
}

bool replays_recorded_run(const AllocatorSpec& allocator, const WorkloadSpec& workload) {
  if (!workload.has_recorded_alloc_conf || !allocator_traits(allocator.name).accepts_alloc_conf) return false;
  auto it = allocator.options.find("alloc_conf");
  return caching::same_decisions(it == allocator.options.end() ? std::string() : it->second,
                                 workload.recorded_alloc_conf);
}

RunSettings case_settings(const RunSettings& run, const AllocatorSpec& allocator, const WorkloadSpec& workload) {
  RunSettings settings = run;
  if (replays_recorded_run(allocator, workload)) settings.segment_placements = workload.recorded_placements;
  return settings;
}

FrontierSpec parse_frontier_section(const YamlReader& y, const YAML::Node& n, const Config& c);

namespace {

std::vector<std::string> workload_kind_names() {
  std::vector<std::string> names;
  for (const auto& k : workload_kinds()) names.push_back(k.name);
  return names;
}

// An entry of a list that is either `name` or `name: {options}`: returns (name, options node, mark).
struct NamedEntry {
  std::string name;
  YAML::Node params;
  YAML::Mark name_mark;
};

// Scalars as the YAML text (24GiB stays 24GiB), maps with their keys sorted (nlohmann's object).
nlohmann::json yaml_to_json(const YAML::Node& n) {
  if (!n || n.IsNull()) return nullptr;
  if (n.IsScalar()) return n.Scalar();
  if (n.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (std::size_t i = 0; i < n.size(); ++i) a.push_back(yaml_to_json(n[i]));
    return a;
  }
  nlohmann::json o = nlohmann::json::object();
  for (auto it = n.begin(); it != n.end(); ++it) o[it->first.Scalar()] = yaml_to_json(it->second);
  return o;
}

NamedEntry named_entry(const YamlReader& y, const YAML::Node& item, const std::string& key) {
  if (item.IsScalar()) return {item.Scalar(), YAML::Node(), item.Mark()};
  if (item.IsMap() && item.size() == 1) {
    auto it = item.begin();
    return {it->first.Scalar(), it->second, it->first.Mark()};
  }
  y.fail(item, key, "expected a name, or a map with a single name: {options}");
}

void parse_device(const YamlReader& y, const YAML::Node& n, Config& c) {
  y.expect_map(n, "device", {"capacity", "kind"});
  if (n["capacity"]) {  // one size, or a list: a capacity sweep
    c.capacities = y.sizes(n["capacity"], "device.capacity");
    for (std::size_t i = 0; i < c.capacities.size(); ++i)
      if (c.capacities[i] > kMaxDeviceBytes) {
        const bool list = n["capacity"].IsSequence();
        y.fail(list ? n["capacity"][i] : n["capacity"], list ? fmt::format("device.capacity[{}]", i) : "device.capacity",
               fmt::format("{} is larger than 1024TiB, the largest device accepted", c.capacities[i]));
      }
    c.device.capacity_bytes = c.capacities.front();
  }
  if (n["kind"]) {
    auto k = y.choice(n["kind"], "device.kind", {"auto", "sim", "cuda"});
    c.device.choice = k == "sim" ? DeviceChoice::Sim : k == "cuda" ? DeviceChoice::Cuda : DeviceChoice::Auto;
  }
}

void parse_allocators(const YamlReader& y, const YAML::Node& n, Config& c) {
  y.expect_sequence(n, "allocators");
  if (n.size() == 0) y.fail(n, "allocators", fmt::format("the list is empty (valid: {})", allocator_names()));
  for (std::size_t i = 0; i < n.size(); ++i) {
    std::string key = fmt::format("allocators[{}]", i);
    NamedEntry e = named_entry(y, n[i], key);
    const AllocatorEntry* entry = find_allocator(e.name);
    if (!entry)
      y.fail(e.name_mark, key, fmt::format("unknown allocator '{}' (valid: {})", e.name, allocator_names()));
    AllocatorSpec spec{e.name, {}, {}};
    if (e.params && !e.params.IsNull()) {
      // `label` names the setting in the tables; every other key is the allocator's option.
      std::vector<std::string> keys = entry->option_keys();
      keys.push_back("label");
      y.expect_map(e.params, key + "." + e.name, keys);
      for (auto it = e.params.begin(); it != e.params.end(); ++it) {
        const std::string k = it->first.Scalar();
        if (!it->second.IsScalar()) y.fail(it->second, key + "." + e.name + "." + k, "expected a single value");
        if (k == "label") {
          spec.label = y.string(it->second, key + "." + e.name + ".label");
          if (spec.label.empty() || spec.label.find_first_of("\n\r") != std::string::npos)
            y.fail(it->second, key + "." + e.name + ".label", "must be a non-empty name on one line");
          continue;
        }
        spec.options[k] = it->second.Scalar();
      }
    }
    try {
      validate_allocator_options(spec.name, spec.options);  // before anything runs
    } catch (const OptionError& err) {
      YAML::Node at = e.params && e.params[err.key] ? e.params[err.key] : n[i];
      y.fail(at, key + "." + e.name + "." + err.key, fmt::format("{} (valid: {})", err.what(), err.valid));
    }
    // One setting, one spelling: a boolean written yes, 1 or True is "true" (so it gets one row
    // label, one case id, and --allocator 'x[k=true]' finds it), and an empty alloc_conf
    // (PyTorch's defaults) is the allocator without one. Equal settings then meet below.
    for (auto& option : spec.options) {
      const std::string& k = option.first;
      const auto schema = std::find_if(entry->options.begin(), entry->options.end(),
                                       [&](const AllocatorOption& o) { return o.key == k; });
      if (schema != entry->options.end() && schema->valid == "true, false")
        if (const auto b = parse_bool(option.second)) option.second = *b ? "true" : "false";
    }
    if (auto it = spec.options.find("alloc_conf");
        it != spec.options.end() && it->second.find_first_not_of(" \t") == std::string::npos)
      spec.options.erase(it);
    // Labels name the rows and select allocators (--allocator): two settings may not share one.
    for (std::size_t j = 0; j < c.allocators.size(); ++j)
      if (c.allocators[j].display_label() == spec.display_label()) {
        YAML::Node at = e.params && e.params["label"] ? e.params["label"] : n[i];
        y.fail(at, key + "." + e.name + (spec.label.empty() ? "" : ".label"),
               fmt::format("'{}' already names allocators[{}] (give this one a different `label:`)",
                           spec.display_label(), j));
      }
    c.allocators.push_back(std::move(spec));
  }
}

void parse_workloads(const YamlReader& y, const YAML::Node& n, Config& c, const std::string& dir) {
  y.expect_sequence(n, "workloads");
  if (n.size() == 0)
    y.fail(n, "workloads", fmt::format("the list is empty (valid kinds: {})", join(workload_kind_names())));
  for (std::size_t i = 0; i < n.size(); ++i) {
    std::string key = fmt::format("workloads[{}]", i);
    NamedEntry e = named_entry(y, n[i], key);
    const WorkloadKind* kind = nullptr;
    for (const auto& k : workload_kinds())
      if (k.name == e.name) kind = &k;
    if (!kind)
      y.fail(e.name_mark, key,
             fmt::format("unknown workload '{}' (valid: {})", e.name, join(workload_kind_names())));
    YAML::Node params = e.params ? e.params : YAML::Node(YAML::NodeType::Map);
    y.expect_map(params, key + "." + e.name, kind->keys);
    c.workloads.push_back(kind->parse(y, params, key + "." + e.name, dir));
    c.workloads.back().params_json = yaml_to_json(params);
    const WorkloadSpec& w = c.workloads.back();
    // A trace's memory_limit is a fraction of the device: at most every capacity it runs at.
    for (const Bytes cap : c.capacities)
      if (w.memory_limit_bytes && cap && w.memory_limit_bytes > cap)
        y.fail(params["memory_limit"], key + "." + e.name + ".memory_limit",
               fmt::format("{} is more than the device's capacity {} (valid: up to every capacity of device.capacity; "
                           "a memory fraction is at most 1)",
                           format_bytes(w.memory_limit_bytes), format_bytes(cap)));
    // Traces are labelled by their file's name: two files of one name, or one file twice, would
    // share a table section and each other's baseline.
    if (w.kind != "trace" || w.input_files.empty()) continue;
    namespace fs = std::filesystem;
    for (std::size_t j = 0; j < i; ++j) {
      const WorkloadSpec& o = c.workloads[j];
      std::error_code ec;
      if (o.kind != "trace" || o.input_files.empty() ||
          fs::path(o.input_files[0]).filename() != fs::path(w.input_files[0]).filename())
        continue;
      if (fs::equivalent(o.input_files[0], w.input_files[0], ec))
        y.fail(params["path"], key + "." + e.name + ".path",
               fmt::format("the file workloads[{}] replays ({}): its rows would share one table section and "
                           "baseline; to compare its entries (a memory_limit and none), copy the file under another name",
                           j, printable_text(w.input_files[0])));
      y.fail(params["path"], key + "." + e.name + ".path",
             fmt::format("another file of the name workloads[{}] replays ({} and {}): traces are labelled by their "
                         "file's name in the tables, so give one of them another name",
                         j, printable_text(o.input_files[0]), printable_text(w.input_files[0])));
    }
  }
}

void parse_run(const YamlReader& y, const YAML::Node& n, Config& c) {
  y.expect_map(n, "run", {"on_oom", "repeat", "timeline"});
  if (n["on_oom"]) {
    auto v = y.choice(n["on_oom"], "run.on_oom", {"stop", "skip_step", "continue"});
    c.run.on_oom = v == "stop" ? OnOom::Stop : v == "skip_step" ? OnOom::SkipStep : OnOom::Continue;
  }
  if (n["repeat"]) c.run.repeat = y.count(n["repeat"], "run.repeat", 1, 1000);
  if (n["timeline"]) c.run.timeline = y.boolean(n["timeline"], "run.timeline");
}

void parse_output(const YamlReader& y, const YAML::Node& n, Config& c) {
  y.expect_map(n, "output", {"formats", "baseline", "metrics"});
  if (n["baseline"]) c.baseline = y.choice(n["baseline"], "output.baseline", baseline_choices(c));
  // A scalar or a list of choices, each checked against `valid`.
  auto choices = [&](const char* key, const std::vector<std::string>& valid, std::vector<std::string>& out) {
    if (!n[key]) return;
    const YAML::Node f = n[key];
    const std::string where = std::string("output.") + key;
    std::vector<YAML::Node> items;
    if (f.IsScalar()) items.push_back(f);
    else if (f.IsSequence()) for (std::size_t i = 0; i < f.size(); ++i) items.push_back(f[i]);
    else y.fail(f, where, fmt::format("expected a list (valid: {})", join(valid)));
    // Leaving the key out gives the defaults; an empty list would silently give them too.
    if (items.empty()) y.fail(f, where, fmt::format("an empty list: name at least one (valid: {})", join(valid)));
    for (std::size_t i = 0; i < items.size(); ++i)
      out.push_back(y.choice(items[i], fmt::format("{}[{}]", where, i), valid));
  };
  choices("formats", valid_formats(), c.formats);
  std::vector<std::string> metric_choices = metric_families();
  metric_choices.push_back("all");
  choices("metrics", metric_choices, c.metrics);
  if (std::find(c.metrics.begin(), c.metrics.end(), "all") != c.metrics.end()) c.metrics = metric_families();
}

}  // namespace

std::vector<std::string> baseline_choices(const std::vector<AllocatorSetting>& settings) {
  std::vector<std::string> choices;
  for (const auto& s : settings) choices.push_back(s.label);
  for (const auto& s : settings) {
    const auto of_name = std::count_if(settings.begin(), settings.end(),
                                       [&](const AllocatorSetting& t) { return t.name == s.name; });
    if (of_name == 1 && std::find(choices.begin(), choices.end(), s.name) == choices.end()) choices.push_back(s.name);
  }
  return choices;
}

std::vector<std::string> baseline_choices(const Config& config) {
  std::vector<AllocatorSetting> settings;
  for (const auto& a : config.allocators) settings.push_back({a.display_label(), a.name});
  return baseline_choices(settings);
}

void select_allocators(Config& config, const std::vector<std::string>& flags) {
  if (flags.empty()) return;
  std::vector<std::string> labels;
  for (const auto& a : config.allocators) labels.push_back(a.display_label());
  auto matches = [&](std::size_t i, const std::string& flag) {
    return flag == config.allocators[i].name || flag == labels[i];
  };
  for (const auto& f : flags) {
    bool known = false;
    for (std::size_t i = 0; i < labels.size(); ++i) known = known || matches(i, f);
    if (!known)
      throw std::invalid_argument(fmt::format("--allocator: '{}' is not an allocator of {} (valid: {})", f,
                                              config.path, join(labels)));
  }
  std::vector<AllocatorSpec> kept;
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (std::any_of(flags.begin(), flags.end(), [&](const std::string& f) { return matches(i, f); }))
      kept.push_back(config.allocators[i]);
  config.allocators = std::move(kept);
}

namespace {

// Where the first document after the first one that holds anything but a lone null starts, if
// one does. Read as parser events, not with YAML::LoadAll: on some malformed inputs yaml-cpp's
// parser stops advancing and hands out the same empty document for ever (LoadAll then fills
// memory; fuzz_config found one), which is a syntax error at that place here.
std::optional<YAML::Mark> second_document(const std::string& text) {
  struct Probe final : YAML::EventHandler {
    YAML::Mark start;
    std::optional<YAML::Mark> content;  // the first node that is not a lone null
    void OnDocumentStart(const YAML::Mark& m) override { start = m; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { seen(m); }
    void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { seen(m); }
    void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
      seen(m);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
      seen(m);
    }
    void OnMapEnd() override {}
    void seen(const YAML::Mark& m) {
      if (!content) content = m;
    }
  };
  std::istringstream in(text);
  YAML::Parser parser(in);
  Probe first;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  std::optional<int> last_empty;  // where the last empty document started
  for (;;) {
    Probe next;
    if (!parser.HandleNextDocument(next)) return std::nullopt;
    if (next.content) return next.content;
    if (last_empty == next.start.pos)
      throw YAML::ParserException(next.start, "the text from here cannot be read as YAML");
    last_empty = next.start.pos;
  }
}

}  // namespace

Config load_config(const std::string& path) {
  YamlReader y(path);
  std::string text;
  try {
    text = read_file_bounded(path, 16 * MiB);  // a config is a short YAML file
  } catch (const BoundedReadError& e) {
    throw ConfigError(path, 0, 0, "", fmt::format("the config file: {}", e.what()));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
    // A second document ("---" and more keys) would otherwise be ignored.
    if (const std::optional<YAML::Mark> at = second_document(text))
      throw ConfigError(path, at->line + 1, at->column + 1, "",
                        "a second YAML document: a config is one document (remove the '---' line above it)");
  } catch (const YAML::Exception& e) {
    throw ConfigError(path, e.mark.line + 1, e.mark.column + 1, "", "YAML syntax error: " + e.msg);
  }
  if (!root || root.IsNull()) throw ConfigError(path, 0, 0, "", "the config is empty");
  y.expect_unique_keys(root);
  y.expect_map(root, "", {"name", "description", "device", "allocators", "workloads", "run", "output", "frontier"});
  Config c;
  c.path = path;
  if (root["description"] && !root["description"].IsNull()) y.string(root["description"], "description");  // free text
  c.name = root["name"] ? y.string(root["name"], "name")
                        : std::filesystem::path(path).stem().string();
  if (c.name.empty() || c.name.find_first_of("/\\ ") != std::string::npos)
    y.fail(root["name"], "name", "must be a non-empty name without spaces or slashes");
  // It names the output folder: a name the file system takes, readable in a listing.
  if (c.name.size() > 100 || std::any_of(c.name.begin(), c.name.end(), [](char ch) {
        return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f;
      }))
    y.fail(root["name"], "name",
           fmt::format("'{}' must be at most 100 characters without control characters (it names the output folder)",
                       escaped_excerpt(c.name, 80)));
  if (root["device"]) parse_device(y, root["device"], c);
  if (!root["allocators"]) y.fail(root, "allocators", fmt::format("missing (valid: {})", allocator_names()));
  if (!root["workloads"])
    y.fail(root, "workloads", fmt::format("missing (valid kinds: {})", join(workload_kind_names())));
  parse_allocators(y, root["allocators"], c);
  std::string dir = std::filesystem::path(path).parent_path().string();
  parse_workloads(y, root["workloads"], c, dir.empty() ? "." : dir);
  if (root["run"]) parse_run(y, root["run"], c);
  if (root["output"]) parse_output(y, root["output"], c);
  if (root["frontier"]) c.frontier = parse_frontier_section(y, root["frontier"], c);  // frontier_config.cpp
  return c;
}

}  // namespace gmb
