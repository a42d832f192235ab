#include "harness/compare/compare.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/units.h"
#include "harness/io/bounded_read.h"
#include "harness/report/report.h"
#include "harness/report/table_format.h"
#include "harness/run/json_text.h"

namespace gmb {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<double> number_at(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string string_at(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

bool bool_at(const json& j, const char* key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// The allocator setting of a case: its allocator_label, else the label before " x ".
std::string allocator_key(const json& c) {
  std::string a = string_at(c, "allocator_label");
  if (!a.empty()) return a;
  std::string l = string_at(c, "label");
  return l.substr(0, l.find(" x "));
}

// The keys the cases of one input are matched by: the label, or the allocator setting. A key
// that repeats inside one results.json (a capacity sweep runs the same case at several
// capacities; allocator matching, several workloads) gets the capacity, then a count.
std::vector<std::string> case_keys(const CompareInput& in, CompareMatch match) {
  std::vector<std::string> labels;
  std::map<std::string, int> seen;
  for (const auto& c : in.results["cases"])
    labels.push_back(match == CompareMatch::Allocator ? allocator_key(c) : string_at(c, "label"));
  for (const auto& l : labels) ++seen[l];
  std::vector<std::string> keys;
  std::map<std::string, int> used;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    std::string key = labels[i];
    const json& c = in.results["cases"][i];
    if (seen[key] > 1) {
      // The capacity asked for: on a GPU the capacity left differs a little from case to case.
      auto cap = number_at(c, "capacity_requested_bytes");
      if (!cap || *cap == 0) cap = number_at(c, "capacity_bytes");
      if (cap && (match == CompareMatch::Allocator || key.find(" @ ") == std::string::npos))
        key += " @ " + format_bytes(static_cast<Bytes>(*cap));
    }
    if (int n = ++used[key]; n > 1) key += fmt::format(" #{}", n);
    keys.push_back(key);
  }
  return keys;
}

// The workloads an input ran (workload_label, else the label after " x "), in order, once each.
std::vector<std::string> workloads_of(const CompareInput& in) {
  std::vector<std::string> out;
  for (const auto& c : in.results["cases"]) {
    std::string w = string_at(c, "workload_label");
    if (w.empty()) {
      std::string l = string_at(c, "label");
      auto x = l.find(" x ");
      w = x == std::string::npos ? "" : l.substr(x + 3);
      if (auto at = w.find(" @ "); at != std::string::npos) w = w.substr(0, at);
    }
    if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
  }
  return out;
}

CompareCell cell_of(const json& c) {
  CompareCell cell;
  cell.present = true;
  cell.error = string_at(c, "error");
  cell.peak_reserved_bytes = number_at(c, "peak_reserved_bytes").value_or(0);
  cell.fragmentation = number_at(c, "fragmentation").value_or(0);
  cell.hit_rate = number_at(c, "hit_rate").value_or(0);
  if (c.contains("throughput")) {
    const json& t = c["throughput"];
    cell.steps_per_s = number_at(t, "steps_per_s").value_or(0);
    cell.tokens_per_s = number_at(t, "tokens_per_s").value_or(0);
    cell.throughput_modeled = bool_at(t, "modeled");
  }
  cell.memory_modeled = bool_at(c, "memory_modeled");
  if (c.contains("oom") && c["oom"].is_object()) {
    cell.has_oom = true;
    cell.oom_kind = string_at(c["oom"], "kind");
    cell.oom_step = static_cast<std::uint64_t>(number_at(c["oom"], "step").value_or(0));
  }
  cell.ooms = static_cast<std::uint64_t>(number_at(c, "ooms").value_or(cell.has_oom ? 1 : 0));
  cell.runs = static_cast<std::uint64_t>(number_at(c, "repeats").value_or(1));
  // A case without measurements (it failed before its first run) counts as an error.
  if (cell.error.empty() && !number_at(c, "peak_reserved_bytes")) cell.error = "no measurements";
  return cell;
}

// What one table of the comparison shows.
enum class MetricKind { Bytes, Fraction, Rate, Oom };
struct Metric {
  const char* key;
  const char* title;
  MetricKind kind;
};

std::vector<Metric> metrics_of(const Comparison& c) {
  std::vector<Metric> m = {{"peak_reserved_bytes", "Peak reserved", MetricKind::Bytes},
                           {"fragmentation", "Fragmentation", MetricKind::Fraction},
                           {"hit_rate", "Hit rate", MetricKind::Fraction},
                           {"steps_per_s", "Steps/s", MetricKind::Rate}};
  if (c.any_tokens) m.push_back({"tokens_per_s", "Tokens/s", MetricKind::Rate});
  m.push_back({"oom", "OOM", MetricKind::Oom});
  return m;
}

double value_of(const CompareCell& cell, const Metric& m) {
  std::string k = m.key;
  if (k == "peak_reserved_bytes") return cell.peak_reserved_bytes;
  if (k == "fragmentation") return cell.fragmentation;
  if (k == "hit_rate") return cell.hit_rate;
  if (k == "steps_per_s") return cell.steps_per_s;
  if (k == "tokens_per_s") return cell.tokens_per_s;
  return 0;
}

// Memory figures (and so the OOM point) are modeled for the native allocators on sim; rates
// are modeled on sim.
bool modeled_of(const CompareCell& cell, const Metric& m) {
  return m.kind == MetricKind::Rate ? cell.throughput_modeled : cell.memory_modeled;
}

bool usable(const CompareCell& cell) { return cell.present && cell.error.empty(); }

// other / first; undefined where either is missing or the first is zero and the other not.
// Fractions are compared by their difference instead (diff_pp_of): a ratio of two percentages
// (0x from 23.5% to 0%, 3x from 1% to 3%) says little.
std::optional<double> ratio_of(const CompareCell& first, const CompareCell& other, const Metric& m) {
  if (m.kind == MetricKind::Oom || m.kind == MetricKind::Fraction || !usable(first) || !usable(other))
    return std::nullopt;
  double a = value_of(first, m), b = value_of(other, m);
  if (a == 0) return b == 0 ? std::optional<double>(1.0) : std::nullopt;
  return b / a;
}

// other - first in percentage points, for fractions.
std::optional<double> diff_pp_of(const CompareCell& first, const CompareCell& other, const Metric& m) {
  if (m.kind != MetricKind::Fraction || !usable(first) || !usable(other)) return std::nullopt;
  return 100 * (value_of(other, m) - value_of(first, m));
}

// "+2.4", "-0.3", never "-0.0".
std::string signed_points(double pp) {
  const std::string v = fmt::format("{:+.1f}", pp);
  return v == "-0.0" ? "+0.0" : v;
}
std::string pp_text(double pp) { return signed_points(pp) + " pp"; }

// The comparison column of a metric for input i: the ratio, or the difference in points.
std::string versus_text(const CompareRow& row, std::size_t i, const Metric& m) {
  if (m.kind == MetricKind::Fraction) {
    auto d = diff_pp_of(row.cells[0], row.cells[i], m);
    return d ? pp_text(*d) : "–";
  }
  auto r = ratio_of(row.cells[0], row.cells[i], m);
  return r ? format_number(*r, 3) + "x" : "–";
}

std::string oom_text(const CompareCell& cell) {
  if (!cell.has_oom) return "none";
  std::string s = fmt::format("{} at step {}", cell.oom_kind, cell.oom_step);
  if (cell.ooms > 1) s += fmt::format(" ({} OOMs)", cell.ooms);
  return s;
}

// Same OOM as the first input: both none, or the same kind at the same step.
std::optional<bool> oom_same(const CompareCell& first, const CompareCell& other) {
  if (!usable(first) || !usable(other)) return std::nullopt;
  if (first.has_oom != other.has_oom) return false;
  return !first.has_oom || (first.oom_kind == other.oom_kind && first.oom_step == other.oom_step);
}

std::string device_text(const CompareInput& in) { return fmt::format("{}: {}", in.device_kind, in.device_name); }

// The capacity, or every capacity of a sweep ("80.00 GiB, 20.00 GiB, 17.00 GiB").
std::string capacity_text(const CompareInput& in) {
  if (in.capacity_sweep.empty()) return format_bytes(in.capacity_bytes);
  std::vector<std::string> each;
  for (Bytes b : in.capacity_sweep) each.push_back(format_bytes(b));
  return fmt::format("{}", fmt::join(each, ", "));
}

bool any_modeled(const Comparison& c) {
  for (const auto& row : c.rows)
    for (const auto& cell : row.cells)
      if (cell.present && (cell.memory_modeled || cell.throughput_modeled)) return true;
  return false;
}

std::string ratio_header(const Comparison& c, std::size_t i) {
  return fmt::format("{}/{}", c.inputs[i].name, c.inputs[0].name);
}
std::string diff_header(const Comparison& c, std::size_t i) {
  return fmt::format("{} − {}", c.inputs[i].name, c.inputs[0].name);
}

const char* match_words(CompareMatch m) {
  return m == CompareMatch::Allocator ? "cases matched by allocator setting" : "cases matched by label";
}

}  // namespace

CompareInput load_compare_input(const std::string& path) {
  CompareInput in;
  in.path = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) in.path = (fs::path(path) / "results.json").string();
  std::string text;
  try {
    text = read_file_bounded(in.path, 1024 * MiB);  // results.json of the longest sweeps: tens of MB
  } catch (const BoundedReadError& e) {
    throw CompareError(fmt::format("{}: {}", in.path, e.what()));
  }
  try {
    in.results = json::parse(text);
  } catch (const json::parse_error& e) {
    throw CompareError(fmt::format("{}: not JSON (parse error at byte {}); expected a gpumembench results.json",
                                   in.path, e.byte));
  }
  const json& r = in.results;
  if (!r.is_object() || !r.contains("tool") || string_at(r["tool"], "name") != "gpumembench")
    throw CompareError(fmt::format("{}: not a gpumembench results.json (no \"tool\": {{\"name\": \"gpumembench\"}})",
                                   in.path));
  if (!r.contains("cases") || !r["cases"].is_array())
    throw CompareError(fmt::format("{}: not a gpumembench results.json (no \"cases\" list)", in.path));
  for (std::size_t i = 0; i < r["cases"].size(); ++i)
    if (string_at(r["cases"][i], "label").empty())
      throw CompareError(fmt::format("{}: cases[{}] has no \"label\"", in.path, i));
  const json dev = r.contains("device") ? r["device"] : json::object();
  in.device_kind = string_at(dev, "kind");
  in.device_name = string_at(dev, "name");
  in.capacity_bytes = static_cast<Bytes>(number_at(dev, "capacity_bytes").value_or(0));
  if (dev.contains("capacity_sweep_bytes") && dev["capacity_sweep_bytes"].is_array() &&
      dev["capacity_sweep_bytes"].size() > 1)
    for (const json& b : dev["capacity_sweep_bytes"])
      if (b.is_number_unsigned()) in.capacity_sweep.push_back(b.get<Bytes>());
  in.tool_version = string_at(r["tool"], "version");
  if (r.contains("config")) in.config_name = string_at(r["config"], "name");
  if (r.contains("run")) in.repeat = static_cast<std::uint64_t>(number_at(r["run"], "repeat").value_or(1));
  // Short name: the folder holding results.json ("h200"), or the file's own stem.
  fs::path p = fs::absolute(in.path);
  in.name = p.filename() == "results.json" ? p.parent_path().filename().string() : p.stem().string();
  if (in.name.empty()) in.name = p.string();
  return in;
}

const std::vector<std::string>& compare_match_names() {
  static const std::vector<std::string> names = {"allocator", "label"};
  return names;
}

Comparison compare_results(std::vector<CompareInput> inputs, CompareMatch match) {
  if (inputs.size() < 2)
    throw CompareError("compare needs at least two results.json files (or folders holding one)");
  if (match == CompareMatch::Auto) {
    const auto first = workloads_of(inputs[0]);
    match = CompareMatch::Label;
    for (std::size_t i = 1; i < inputs.size(); ++i)
      if (workloads_of(inputs[i]) != first) match = CompareMatch::Allocator;
  }
  // Unique names: a second "h200" becomes "h200#2".
  std::map<std::string, int> names;
  for (auto& in : inputs) ++names[in.name];
  std::map<std::string, int> used;
  for (auto& in : inputs)
    if (names[in.name] > 1) in.name += fmt::format("#{}", ++used[in.name]);

  Comparison c;
  c.match = match;
  std::vector<std::vector<std::string>> keys;
  for (const auto& in : inputs) keys.push_back(case_keys(in, match));
  std::vector<std::string> order;
  std::map<std::string, std::size_t> row_of;
  for (const auto& k : keys)
    for (const auto& label : k)
      if (!row_of.count(label)) {
        row_of[label] = order.size();
        order.push_back(label);
      }
  const std::set<std::string> first(keys[0].begin(), keys[0].end());
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    bool shared = std::any_of(keys[i].begin(), keys[i].end(), [&](auto& k) { return first.count(k) > 0; });
    if (!shared)
      throw CompareError(fmt::format(
          "{}: no case in common with {} ({}; '{}' has '{}', '{}' has '{}'{})", inputs[i].path, inputs[0].path,
          match_words(match), inputs[i].name, keys[i].empty() ? "no cases" : keys[i][0], inputs[0].name,
          keys[0].empty() ? "no cases" : keys[0][0],
          match == CompareMatch::Label ? "; --match allocator pairs cases by allocator setting" : ""));
  }
  c.rows.resize(order.size());
  for (std::size_t r = 0; r < order.size(); ++r) {
    c.rows[r].label = order[r];
    c.rows[r].cells.resize(inputs.size());
    c.rows[r].workloads.resize(inputs.size());
  }
  for (std::size_t i = 0; i < inputs.size(); ++i)
    for (std::size_t k = 0; k < keys[i].size(); ++k) {
      const json& j = inputs[i].results["cases"][k];
      CompareCell cell = cell_of(j);
      c.any_tokens = c.any_tokens || cell.tokens_per_s > 0;
      CompareRow& row = c.rows[row_of[keys[i][k]]];
      row.cells[i] = cell;
      row.workloads[i] = string_at(j, "workload_label");
    }
  for (const auto& row : c.rows)
    if (std::all_of(row.cells.begin(), row.cells.end(), [](auto& x) { return x.present; })) ++c.common;
  c.inputs = std::move(inputs);
  return c;
}

std::string compare_markdown(const Comparison& c) {
  std::string out = fmt::format("gpumembench compare: {} inputs, {} of {} cases in every input ({})\n\n",
                                c.inputs.size(), c.common, c.rows.size(), match_words(c.match));
  const bool by_allocator = c.match == CompareMatch::Allocator;
  out += std::string("| input | results | device | capacity | runs per case | config | gpumembench |") +
         (by_allocator ? " workloads |" : "") + "\n";
  out += std::string("|---|---|---|---:|---:|---|---|") + (by_allocator ? "---|" : "") + "\n";
  for (const auto& in : c.inputs) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |", markdown_escape(in.name), markdown_escape(in.path),
                       markdown_escape(device_text(in)), capacity_text(in), in.repeat,
                       markdown_escape(in.config_name), markdown_escape(in.tool_version));
    if (by_allocator) out += " " + markdown_escape(fmt::format("{}", fmt::join(workloads_of(in), "; "))) + " |";
    out += "\n";
  }
  for (const Metric& m : metrics_of(c)) {
    out += fmt::format("\n### {}\n\n| case |", m.title);
    for (const auto& in : c.inputs) out += fmt::format(" {} ({}) |", markdown_escape(in.name), markdown_escape(device_text(in)));
    for (std::size_t i = 1; i < c.inputs.size(); ++i)
      out += fmt::format(" {} |", m.kind == MetricKind::Oom        ? "same as " + markdown_escape(c.inputs[0].name)
                                  : m.kind == MetricKind::Fraction ? markdown_escape(diff_header(c, i))
                                                                   : markdown_escape(ratio_header(c, i)));
    out += "\n|---|";
    for (std::size_t i = 0; i < 2 * c.inputs.size() - 1; ++i) out += m.kind == MetricKind::Oom ? "---|" : "---:|";
    out += "\n";
    for (const auto& row : c.rows) {
      out += fmt::format("| {} |", markdown_escape(row.label));
      for (const auto& cell : row.cells) {
        std::string v;
        if (!cell.present) v = "–";
        else if (!cell.error.empty()) v = "error";
        else if (m.kind == MetricKind::Bytes) v = format_bytes(static_cast<Bytes>(value_of(cell, m)));
        else if (m.kind == MetricKind::Fraction) v = fmt::format("{:.1f}%", 100 * value_of(cell, m));
        else if (m.kind == MetricKind::Rate) v = format_number(value_of(cell, m));
        else v = oom_text(cell);
        if (usable(cell) && modeled_of(cell, m)) v += " (modeled)";
        out += " " + v + " |";
      }
      for (std::size_t i = 1; i < row.cells.size(); ++i) {
        if (m.kind == MetricKind::Oom) {
          auto same = oom_same(row.cells[0], row.cells[i]);
          out += fmt::format(" {} |", !same ? "–" : *same ? "yes" : "no");
        } else {
          out += " " + versus_text(row, i, m) + " |";
        }
      }
      out += "\n";
    }
  }
  out += fmt::format("\nRatios: each input's value over {}'s; fractions (fragmentation, hit rate): each input's "
                     "value minus {}'s, in percentage points (pp); –: the case is missing there, failed, or the ratio is "
                     "undefined (a zero in {}).\n",
                     c.inputs[0].name, c.inputs[0].name, c.inputs[0].name);
  if (any_modeled(c))
    out += "(modeled): figure from the simulated device's model of the driver or of the step time, not a measurement.\n";
  return out;
}

std::string compare_csv(const Comparison& c) {
  std::string out =
      "label,input,input_name,path,device_kind,device_name,present,error,runs,peak_reserved_bytes,"
      "peak_reserved_ratio,fragmentation,fragmentation_diff_pp,steps_per_s,steps_per_s_ratio,tokens_per_s,"
      "tokens_per_s_ratio,oom_kind,oom_step,ooms,oom_same_as_first,memory_modeled,throughput_modeled,hit_rate,"
      "hit_rate_diff_pp,workload\n";
  const Metric reserved{"peak_reserved_bytes", "", MetricKind::Bytes}, frag{"fragmentation", "", MetricKind::Fraction},
      sps{"steps_per_s", "", MetricKind::Rate}, tps{"tokens_per_s", "", MetricKind::Rate},
      hits{"hit_rate", "", MetricKind::Fraction};
  auto ratio = [](std::optional<double> r) { return r ? fmt::format("{:.6g}", *r) : std::string(); };
  for (const auto& row : c.rows)
    for (std::size_t i = 0; i < row.cells.size(); ++i) {
      const CompareCell& cell = row.cells[i];
      const CompareInput& in = c.inputs[i];
      out += fmt::format("{},{},{},{},{},{},{},{},", csv_quote(row.label), i, csv_quote(in.name), csv_quote(in.path),
                         csv_quote(in.device_kind), csv_quote(in.device_name), cell.present ? 1 : 0,
                         csv_quote(cell.error));
      if (!usable(cell)) {
        out += std::string(17, ',') + csv_quote(row.workloads[i]) + "\n";
        continue;
      }
      auto same = oom_same(row.cells[0], cell);
      out += fmt::format("{},{:.0f},{},{:.6f},{},{:.6g},{},{:.6g},{},{},{},{},{},{},{},{:.6f},{},{}\n", cell.runs,
                         cell.peak_reserved_bytes, ratio(ratio_of(row.cells[0], cell, reserved)), cell.fragmentation,
                         ratio(diff_pp_of(row.cells[0], cell, frag)), cell.steps_per_s,
                         ratio(ratio_of(row.cells[0], cell, sps)), cell.tokens_per_s,
                         ratio(ratio_of(row.cells[0], cell, tps)), cell.has_oom ? cell.oom_kind : "",
                         cell.has_oom ? std::to_string(cell.oom_step) : "", cell.ooms,
                         same ? (*same ? "1" : "0") : "", cell.memory_modeled ? 1 : 0, cell.throughput_modeled ? 1 : 0,
                         cell.hit_rate, ratio(diff_pp_of(row.cells[0], cell, hits)), csv_quote(row.workloads[i]));
    }
  return out;
}

static json device_json(const CompareInput& in) {
  json d = {{"kind", in.device_kind}, {"name", in.device_name}, {"capacity_bytes", in.capacity_bytes}};
  if (!in.capacity_sweep.empty()) d["capacity_sweep_bytes"] = in.capacity_sweep;
  return d;
}

json compare_json(const Comparison& c) {
  json inputs = json::array();
  for (const auto& in : c.inputs)
    inputs.push_back({{"name", in.name},
                      {"path", in.path},
                      {"device", device_json(in)},
                      {"tool_version", in.tool_version},
                      {"config", in.config_name},
                      {"repeat", in.repeat}});
  json cases = json::array();
  const auto metrics = metrics_of(c);
  for (const auto& row : c.rows) {
    json per = json::array();
    for (std::size_t i = 0; i < row.cells.size(); ++i) {
      const CompareCell& cell = row.cells[i];
      if (!cell.present) {
        per.push_back(nullptr);
        continue;
      }
      json j;
      if (!cell.error.empty()) {
        j["error"] = cell.error;
        per.push_back(j);
        continue;
      }
      j["runs"] = cell.runs;
      j["peak_reserved_bytes"] = static_cast<Bytes>(cell.peak_reserved_bytes);
      j["fragmentation"] = cell.fragmentation;
      j["hit_rate"] = cell.hit_rate;
      if (!row.workloads[i].empty()) j["workload"] = row.workloads[i];
      j["steps_per_s"] = cell.steps_per_s;
      j["tokens_per_s"] = cell.tokens_per_s;
      j["oom"] = cell.has_oom ? json{{"kind", cell.oom_kind}, {"step", cell.oom_step}} : json(nullptr);
      j["ooms"] = cell.ooms;
      j["memory_modeled"] = cell.memory_modeled;
      j["throughput_modeled"] = cell.throughput_modeled;
      json ratios = json::object(), diffs = json::object();
      for (const Metric& m : metrics) {
        if (m.kind == MetricKind::Oom) continue;
        if (m.kind == MetricKind::Fraction) {
          auto d = diff_pp_of(row.cells[0], cell, m);
          diffs[m.key] = d ? json(*d) : json(nullptr);
        } else {
          auto r = ratio_of(row.cells[0], cell, m);
          ratios[m.key] = r ? json(*r) : json(nullptr);
        }
      }
      j["ratio_to_first"] = ratios;
      j["difference_to_first_pp"] = diffs;
      auto same = oom_same(row.cells[0], cell);
      j["oom_same_as_first"] = same ? json(*same) : json(nullptr);
      per.push_back(j);
    }
    cases.push_back({{"label", row.label}, {"inputs", per}});
  }
  return json{{"tool", {{"name", "gpumembench"}, {"version", GMB_VERSION}}},
              {"kind", "compare"},
              {"match", c.match == CompareMatch::Allocator ? "allocator" : "label"},
              {"inputs", inputs},
              {"common_cases", c.common},
              {"cases", cases}};
}

// As results.tex: a tabularx as wide as the line (the case column wraps), group headings that
// wrap, headers over two lines, one number format per column, the notes under the table.
std::string compare_latex(const Comparison& c) {
  const std::size_t n = c.inputs.size();
  const std::size_t columns = 2 * n;  // case, n values, n - 1 ratios
  double largest = 0;
  for (const auto& row : c.rows)
    for (const auto& cell : row.cells)
      if (usable(cell)) largest = std::max(largest, cell.peak_reserved_bytes);
  const ByteUnit unit = byte_unit_for(largest);
  const std::string dagger = "$^\\dagger$";
  // A header cell over two lines where it is long ("fixed_seq/" over "dynamic_seq").
  auto header = [](const std::string& text) {
    const std::size_t slash = text.find('/');
    if (slash == std::string::npos) return latex_escape(text);
    return "\\begin{tabular}[b]{@{}r@{}}" + latex_escape(text.substr(0, slash + 1)) + "\\\\" +
           latex_escape(text.substr(slash + 1)) + "\\end{tabular}";
  };

  std::string out = fmt::format("% gpumembench {} compare:", GMB_VERSION);
  for (const auto& in : c.inputs) out += " " + in.path;
  out += fmt::format("\n% Needs \\usepackage{{booktabs,tabularx}}; as wide as the line: \\input it in a table or "
                     "table*.\n% Ratios: each input over the first; fractions: each input minus the first, in "
                     "percentage points. {}.\n",
                     match_words(c.match));
  out += "{\\setlength{\\tabcolsep}{4pt}%\n";
  out += "\\begin{tabularx}{\\linewidth}{@{}>{\\raggedright\\arraybackslash}X" + std::string(columns - 1, 'r') +
         "@{}}\n\\toprule\nCase";
  for (const auto& in : c.inputs) out += " & " + header(in.name);
  for (std::size_t i = 1; i < n; ++i) out += " & " + header(ratio_header(c, i));
  out += " \\\\\n";
  bool first_group = true;
  for (const Metric& m : metrics_of(c)) {
    out += first_group ? "\\midrule\n" : "\\addlinespace\n";
    first_group = false;
    std::string title = m.title;
    if (m.kind == MetricKind::Bytes) title += fmt::format(" ({})", unit.name);
    if (m.kind == MetricKind::Fraction) title += " (\\%; difference columns: percentage points)";
    if (m.kind == MetricKind::Oom) title += " (kind at step; ratio columns: same as the first)";
    out += fmt::format("\\multicolumn{{{}}}{{@{{}}>{{\\raggedright\\arraybackslash}}p{{\\linewidth}}@{{}}}}{{\\emph{{{}}}}} \\\\\n",
                       columns, title);
    // One format for the values of this metric, one for its ratios.
    std::vector<double> values, ratios;
    for (const auto& row : c.rows) {
      for (const auto& cell : row.cells)
        if (usable(cell) && m.kind == MetricKind::Rate) values.push_back(value_of(cell, m));
      for (std::size_t i = 1; i < n; ++i)
        if (auto r = ratio_of(row.cells[0], row.cells[i], m)) ratios.push_back(*r);
    }
    const NumberColumn value_format = number_column(values), ratio_format = number_column(ratios, 3);
    for (const auto& row : c.rows) {
      out += latex_label(row.label);
      for (const auto& cell : row.cells) {
        std::string v;
        if (!cell.present) v = "--";
        else if (!cell.error.empty()) v = "error";
        else if (m.kind == MetricKind::Bytes) v = format_in(cell.peak_reserved_bytes, unit);
        else if (m.kind == MetricKind::Fraction) v = fmt::format("{:.1f}", 100 * value_of(cell, m));
        else if (m.kind == MetricKind::Rate) v = value_format(value_of(cell, m));
        else v = latex_escape(oom_text(cell));
        if (usable(cell) && modeled_of(cell, m)) v += dagger;
        out += " & " + v;
      }
      for (std::size_t i = 1; i < n; ++i) {
        if (m.kind == MetricKind::Oom) {
          auto same = oom_same(row.cells[0], row.cells[i]);
          out += std::string(" & ") + (!same ? "--" : *same ? "yes" : "no");
        } else if (m.kind == MetricKind::Fraction) {
          auto d = diff_pp_of(row.cells[0], row.cells[i], m);
          out += " & " + (d ? signed_points(*d) : std::string("--"));
        } else {
          auto r = ratio_of(row.cells[0], row.cells[i], m);
          out += " & " + (r ? ratio_format(*r) : std::string("--"));
        }
      }
      out += " \\\\\n";
    }
  }
  out += "\\bottomrule\n\\end{tabularx}}\n\\par\\smallskip\n{\\footnotesize\\raggedright\n";
  for (const auto& in : c.inputs)
    out += fmt::format("{}: {} ({}), {} {}, median of {} run{}.\n", latex_escape(in.name),
                       latex_escape(in.device_name), latex_escape(in.device_kind),
                       in.capacity_sweep.empty() ? "capacity" : "capacities", latex_escape(capacity_text(in)), in.repeat, in.repeat == 1 ? "" : "s");
  if (any_modeled(c)) out += dagger + " modeled (simulated device), not measured.\n";
  out += "\\par}\n";
  return out;
}

std::string compare_text(const Comparison& c, const std::vector<std::string>& formats) {
  std::string out;
  for (const auto& f : formats) {
    if (!out.empty()) out += "\n";
    if (f == "md") out += compare_markdown(c);
    else if (f == "csv") out += compare_csv(c);
    else if (f == "json") out += json_text(compare_json(c), 2) + "\n";
    else if (f == "latex") out += compare_latex(c);
  }
  return out;
}

void write_compare(const Comparison& c, const std::string& dir, const std::vector<std::string>& formats) {
  fs::create_directories(dir);
  auto has = [&](const char* f) { return std::find(formats.begin(), formats.end(), f) != formats.end(); };
  if (has("md")) write_file_atomically((fs::path(dir) / "compare.md").string(), compare_markdown(c));
  if (has("csv")) write_file_atomically((fs::path(dir) / "compare.csv").string(), compare_csv(c));
  if (has("json")) write_file_atomically((fs::path(dir) / "compare.json").string(), json_text(compare_json(c), 2) + "\n");
  if (has("latex")) write_file_atomically((fs::path(dir) / "compare.tex").string(), compare_latex(c));
}

}  // namespace gmb
