#include "harness/cli.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <unordered_map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "allocators/registry.h"
#include "common/units.h"
#include "harness/compare.h"
#include "harness/config.h"
#include "harness/frontier.h"
#include "harness/reduce/reduce_cli.h"
#include "harness/report/markdown_report.h"
#include "harness/report/report.h"
#include "harness/report/timeline_report.h"
#include "harness/rmm_log_writer.h"
#include "harness/snapshot_check.h"
#include "harness/snapshot_export.h"
#include "harness/workload_need.h"
#include "workloads/pytorch_snapshot.h"
#include "workloads/trace.h"

namespace gmb {
namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

DeviceChoice parse_device_choice(const std::string& s) {
  if (s == "sim") return DeviceChoice::Sim;
  if (s == "cuda") return DeviceChoice::Cuda;
  return DeviceChoice::Auto;
}

std::vector<std::string> parse_formats(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ',') {
      if (item == "markdown") item = "md";
      if (item == "tex") item = "latex";
      if (std::find(valid_formats().begin(), valid_formats().end(), item) == valid_formats().end())
        throw UsageError(fmt::format("--format: '{}' is not a format (valid: {})", item, join(valid_formats())));
      out.push_back(item);
      item.clear();
    } else {
      item += text[i];
    }
  }
  return out;
}

Bytes parse_capacity(const std::string& text) {
  auto v = parse_size(text);
  if (!v || *v == 0)
    throw UsageError(fmt::format("--capacity: '{}' is not a size (e.g. 24GiB, 512MiB, 1073741824)", text));
  if (*v > kMaxDeviceBytes)
    throw UsageError(fmt::format("--capacity: {} is larger than 1024TiB, the largest device accepted", text));
  return *v;
}

// Resolves the device choice and says so in one line when falling back to sim.
DeviceSpec choose_device(DeviceSpec spec, bool quiet) {
  if (spec.choice == DeviceChoice::Cuda && !cuda_device_available())
    throw UsageError("--device cuda: no CUDA GPU is visible");
  if (spec.choice == DeviceChoice::Auto) {
    spec.choice = resolve_device(DeviceChoice::Auto);
    if (spec.choice == DeviceChoice::Sim && !quiet)
      std::cerr << "gpumembench: no GPU visible; running on the simulated device (--device sim)\n";
  }
  return spec;
}

// One status line on stderr, rewritten in place: case i/N, run r/R, step s/S, the time since
// the first case and an estimate of the time left for the whole run (this case at its pace so
// far, each later case as long as the mean case). Only on a terminal: a pipe or a log file
// gets nothing, and neither does --quiet.
class Progress {
 public:
  Progress(bool enabled, std::size_t cases, std::uint64_t repeats)
      : enabled_(enabled), cases_(cases), repeats_(std::max<std::uint64_t>(repeats, 1)) {}
  void start_case(std::size_t i, const std::string& label) {
    index_ = i;
    label_ = label;
    case_start_ = std::chrono::steady_clock::now();
    if (i == 0) run_start_ = case_start_;
    last_ = case_start_ - std::chrono::seconds(1);
  }
  // steps 0: not known (a trace read as a stream): no estimate of the time left.
  void step(std::uint64_t repeat, std::uint64_t step, std::uint64_t steps) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(200) && step != steps) return;
    last_ = now;
    const double in_case = std::chrono::duration<double>(now - case_start_).count();
    const double elapsed = std::chrono::duration<double>(now - run_start_).count();
    const double done = steps ? double(repeat * steps + step) / double(repeats_ * steps) : 0;
    std::string left = "?";
    if (done > 0) {
      const double this_case = in_case / done;  // the whole case at its pace so far
      const double mean_case = (elapsed - in_case + this_case) / double(index_ + 1);
      left = duration_text(this_case - in_case + mean_case * double(cases_ - index_ - 1));
    }
    auto line_with = [&](const std::string& label) {
      return fmt::format("case {}/{} {} | run {}/{} | step {}/{} | {} elapsed, ~{} left", index_ + 1, cases_, label,
                         repeat + 1, repeats_, step, steps ? std::to_string(steps) : "?", duration_text(elapsed), left);
    };
    std::string line = line_with(label_);
    // A line longer than the terminal would wrap, and \r could not take it back: shorten the
    // label first, then the line.
    winsize ws{};
    const std::size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
    if (line.size() >= width) {
      const std::size_t rest = line.size() - label_.size();
      line = line_with(label_.substr(0, rest + 12 < width ? width - rest - 2 : 10) + "~");
      if (line.size() >= width) line = line.substr(0, width - 2) + "~";
    }
    fmt::print(stderr, "\r\033[K{}", line);
    std::fflush(stderr);
  }
  void end_case() {
    if (enabled_) fmt::print(stderr, "\r\033[K");
  }

 private:
  static std::string duration_text(double s) {
    if (s < 60) return fmt::format("{:.1f}s", s);
    auto t = static_cast<long long>(s + 0.5);
    if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
    return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
  }
  bool enabled_;
  std::size_t cases_, index_ = 0;
  std::uint64_t repeats_;
  std::string label_;
  std::chrono::steady_clock::time_point run_start_, case_start_, last_;
};

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

int run_config(const std::string& config_path, const std::string& device_flag, const std::string& capacity_flag,
               const std::string& output_flag, const std::string& format_flag, bool quiet,
               const std::string& cmd, std::uint64_t steps_flag, const std::vector<std::string>& allocator_flags) {
  Config config = load_config(config_path);  // throws ConfigError: nothing has run
  if (steps_flag) config.run.max_steps = steps_flag;
  try {
    select_allocators(config, allocator_flags);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  std::vector<std::string> formats = {"md", "csv", "json"};
  if (!config.formats.empty()) formats = config.formats;
  if (!format_flag.empty()) formats = parse_formats(format_flag);
  DeviceSpec spec = config.device;
  if (!device_flag.empty()) spec.choice = parse_device_choice(device_flag);
  if (!capacity_flag.empty()) spec.capacity_bytes = parse_capacity(capacity_flag);
  spec = choose_device(spec, quiet);
  if (!quiet)
    for (const auto& w : config.workloads)
      for (const auto& note : w.notes) std::cerr << "gpumembench: " << note << "\n";

  RunReport report;
  report.tool_version = GMB_VERSION;
  report.config_name = config.name;
  report.config_path = config_path;
  report.command_line = cmd;
  report.started_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
  report.on_oom = to_string(config.run.on_oom);
  report.repeat = config.run.repeat;
  {
    auto device = make_device(spec);
    report.device = device->info();
  }
  std::string out_dir = output_flag.empty()
                            ? fmt::format("results/{}-{}", config.name, utc_now("%Y%m%dT%H%M%SZ"))
                            : output_flag;

  // A capacity sweep (`device: {capacity: [8GiB, 12GiB]}`): one set of cases per capacity,
  // labelled "... @ 8.00 GiB". --capacity replaces the sweep with one capacity.
  std::vector<Bytes> capacities = {spec.capacity_bytes};
  if (capacity_flag.empty() && config.capacities.size() > 1) report.capacity_sweep = capacities = config.capacities;
  std::size_t total = capacities.size() * config.workloads.size() * config.allocators.size();
  Progress progress(!quiet && isatty(STDERR_FILENO), total, config.run.repeat);
  // Each workload's need, computed once for all its allocators and capacities.
  std::vector<std::shared_ptr<const WorkloadNeed>> needs(config.workloads.size());
  std::size_t i = 0;
  for (Bytes cap : capacities) {
    DeviceSpec case_spec = spec;
    case_spec.capacity_bytes = cap;
    std::string at = report.capacity_sweep.empty() ? "" : " @ " + format_bytes(cap);
    for (std::size_t wi = 0; wi < config.workloads.size(); ++wi) {
      const auto& w = config.workloads[wi];
      for (const auto& a : config.allocators) {
        if (!needs[wi]) {
          auto workload = w.make();
          needs[wi] = std::make_shared<const WorkloadNeed>(compute_workload_need(*workload, config.run.max_steps));
        }
        CaseSpec cs{a.name, a.options, w.make, needs[wi]};
        std::string label = a.display_label() + " x " + w.kind + at;
        progress.start_case(i, label);
        report.cases.push_back(
            run_case(cs, case_spec, config.run, [&](auto r, auto s, auto n) { progress.step(r, s, n); }));
        CaseResult& done = report.cases.back();
        if (!a.label.empty()) {  // the config's `label:` names the setting in every table
          done.label = a.label + done.label.substr(std::min(done.label.size(), done.allocator_label.size()));
          done.allocator_label = a.label;
        }
        done.label += at;
        progress.end_case();
        ++i;
      }
    }
  }
  std::cout << markdown_table(report);
  write_reports(report, out_dir, formats);
  if (!quiet) std::cerr << "gpumembench: results written to " << out_dir << "/\n";
  bool any_error = false;
  for (const auto& c : report.cases)
    if (!c.error.empty()) {
      std::cerr << "gpumembench: case " << c.label << " failed: " << c.error << "\n";
      any_error = true;
    }
  return any_error ? 1 : 0;
}

// "recorded run: 2 failed allocations (events 17, 40); replayed: 3 OOMs (first at event 24)".
std::string recorded_vs_replayed(const CaseResult& c) {
  const RecordedOoms& rec = *c.recorded_ooms;
  std::string events;
  for (std::size_t i = 0; i < rec.events.size() && i < 10; ++i) events += (i ? ", " : "") + std::to_string(rec.events[i]);
  if (rec.events.size() > 10 || rec.count > rec.events.size()) events += ", ...";
  std::string line = fmt::format("recorded run: {} failed allocation{}{}{}", rec.count, rec.count == 1 ? "" : "s",
                                 events.empty() ? "" : " (event" + std::string(rec.count == 1 ? " " : "s ") + events + ")",
                                 rec.whole_trace ? "" : " in the part replayed");
  if (!c.runs.empty()) {
    const RunMetrics& m = c.runs.front();
    line += fmt::format("; replayed: {} OOM{}", m.ooms, m.ooms == 1 ? "" : "s");
    if (m.first_oom) line += fmt::format(" (first at event {})", m.first_oom->event);
  }
  return line;
}

struct ReplayArgs {
  std::string trace, allocator, alloc_conf, capacity, memory_limit, device, timeline, output, format, export_snapshot,
      export_rmm_log;
  bool alloc_conf_given = false;
  int trace_device = -1;
  bool quiet = false;
};

int run_replay(const ReplayArgs& a, const std::string& cmd) {
  if (!find_allocator(a.allocator))
    throw UsageError(fmt::format("--allocator: unknown allocator '{}' (valid: {})", a.allocator, allocator_names()));
  if (a.alloc_conf_given && a.allocator != "caching")
    throw UsageError(fmt::format("--alloc-conf applies to the caching allocator, not '{}'", a.allocator));
  if (!a.memory_limit.empty() && a.allocator != "caching")
    throw UsageError(fmt::format("--memory-limit applies to the caching allocator, not '{}'", a.allocator));
  DeviceSpec spec;
  if (!a.device.empty()) spec.choice = parse_device_choice(a.device);
  if (!a.capacity.empty()) spec.capacity_bytes = parse_capacity(a.capacity);
  TraceOpenOptions open_options;
  open_options.device = a.trace_device;
  // The format and the start of the trace are checked before anything runs (TraceError: exit
  // 2); the rest is read as it replays. A PyTorch snapshot is read whole here (its pickle
  // closes only at the end) and kept for the self-check and the export.
  auto source = open_trace(a.trace, open_options);
  const TraceMeta meta = source->meta();
  const PyTorchSnapshot* snapshot = pytorch_snapshot_of(*source);
  auto make_workload = trace_workload_factory(a.trace, open_options, *source);  // a snapshot: parsed once
  if (!snapshot) source.reset();
  if (a.trace_device >= 0 && !snapshot)
    throw UsageError(fmt::format("--trace-device applies to PyTorch snapshots; {} is a {} trace", a.trace, meta.format));
  std::vector<std::string> notes = describe(meta);
  AllocatorOptions options;
  bool recorded_conf = false;
  if (a.alloc_conf_given) {
    if (!a.alloc_conf.empty()) options["alloc_conf"] = a.alloc_conf;
    if (meta.has_alloc_conf)
      notes.push_back(fmt::format("allocator settings: \"{}\" (--alloc-conf); the recorded ones are \"{}\"", a.alloc_conf,
                                  meta.alloc_conf));
  } else if (meta.has_alloc_conf && a.allocator == "caching") {
    if (!meta.alloc_conf.empty()) options["alloc_conf"] = meta.alloc_conf;
    recorded_conf = true;
    notes.push_back(fmt::format("allocator settings: the recorded \"{}\" (--alloc-conf replaces them)", meta.alloc_conf));
  } else if (meta.has_alloc_conf) {
    notes.push_back(fmt::format("the recorded allocator settings \"{}\" are the caching allocator's; not used by {}",
                                meta.alloc_conf, a.allocator));
  }
  // Replayed by PyTorch's allocator with the settings it recorded: the self-check applies.
  const bool own_settings =
      a.allocator == "caching" && meta.has_alloc_conf && (recorded_conf || a.alloc_conf == meta.alloc_conf);
  if (!a.memory_limit.empty()) {
    auto limit = parse_size(a.memory_limit);
    if (!limit || *limit == 0)
      throw UsageError(fmt::format("--memory-limit: '{}' is not a size (e.g. 16GiB, 17179869184)", a.memory_limit));
    options["memory_limit_bytes"] = std::to_string(*limit);
    notes.push_back(fmt::format("memory limit: {} (--memory-limit, as set_per_process_memory_fraction sets it)",
                                format_bytes(*limit)));
  }
  if (a.capacity.empty() && meta.device_capacity) {
    spec.capacity_bytes = meta.device_capacity;
    notes.push_back(fmt::format("capacity: {}, the recording device's (--capacity replaces it)",
                                format_bytes(meta.device_capacity)));
  } else if (a.capacity.empty() && snapshot) {
    notes.push_back(fmt::format("capacity: {}: a snapshot records neither the device's size nor a memory fraction "
                                "(--capacity gives the card, --memory-limit the fraction's limit)",
                                resolve_device(spec.choice) == DeviceChoice::Sim ? "80.0 GiB, the simulated device's default"
                                                                                  : "the whole card"));
  }
  {
    // Check the options before running anything.
    SimDeviceOptions o;
    o.capacity_bytes = 1 * GiB;
    auto probe = make_sim_device(o);
    try {
      make_allocator(a.allocator, *probe, options);
    } catch (const OptionError& e) {
      if (recorded_conf)
        throw TraceError(a.trace, 0, fmt::format("the recorded allocator settings \"{}\": {} (valid: {}); "
                                                 "--alloc-conf replaces them", meta.alloc_conf, e.what(), e.valid));
      throw UsageError(fmt::format("--alloc-conf: {} (valid: {})", e.what(), e.valid));
    }
  }
  spec = choose_device(spec, a.quiet);
  if (!a.quiet)
    for (const auto& note : notes) std::cerr << "gpumembench: trace " << a.trace << ": " << note << "\n";
  RunSettings settings;
  settings.on_oom = OnOom::Continue;
  settings.timeline = !a.timeline.empty();
  // A snapshot replayed with its own settings: segments where the driver put them (PyTorch takes
  // the lowest address among equal-size free blocks).
  std::vector<std::pair<Bytes, DevPtr>> placements;
  if (snapshot && own_settings) placements = recorded_placements(*snapshot);
  settings.segment_placements = placements;
  RunReport report;
  report.tool_version = GMB_VERSION;
  report.config_name = "replay";
  report.config_path = a.trace;
  report.command_line = cmd;
  report.started_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
  report.on_oom = to_string(settings.on_oom);
  std::optional<RmmLogWriter> rmm_log;  // written as the replay runs, renamed into place at the end
  if (!a.export_rmm_log.empty()) {
    try {
      rmm_log.emplace(a.export_rmm_log);
    } catch (const std::runtime_error& e) {
      throw UsageError(fmt::format("--export-rmm-log: {}", e.what()));
    }
    settings.event_sink = &*rmm_log;
  }
  CaseSpec cs{a.allocator, options, make_workload};
  CaseResult result = run_case(cs, spec, settings);  // TraceError later in the file: exit 2, nothing written
  {
    auto device = make_device(spec);
    report.device = device->info();
  }
  report.cases.push_back(std::move(result));
  if (rmm_log) {
    rmm_log->commit();
    if (!a.quiet)
      std::cerr << "gpumembench: wrote the replay as an RMM log: " << a.export_rmm_log << " (" << rmm_log->rows()
                << " rows)\n";
  }
  if (!a.timeline.empty()) {
    write_timeline_csv(a.timeline + ".tmp", report.cases[0].timeline);
    std::filesystem::rename(a.timeline + ".tmp", a.timeline);
  }
  std::cout << markdown_table(report);
  if (report.cases[0].recorded_ooms) std::cout << "\n" << recorded_vs_replayed(report.cases[0]) << "\n";
  if (!a.quiet)  // what the reader found on the way (the notes of the start were printed before)
    for (std::size_t i = meta.notes.size(); i < report.cases[0].workload_notes.size(); ++i)
      std::cerr << "gpumembench: trace " << a.trace << ": " << report.cases[0].workload_notes[i] << "\n";
  if (snapshot && own_settings) {
    SnapshotCheck check = check_snapshot_replay(*snapshot, options, report.device.capacity_bytes);
    std::cout << to_text(check) << (check.checked ? " (on the simulated device)" : "") << "\n";
  }
  if (!a.export_snapshot.empty()) {
    // The export replays on the simulated device, reading the trace again (a snapshot: from memory).
    std::unique_ptr<TraceSource> again = snapshot ? nullptr : open_trace(a.trace, open_options);
    std::size_t at = 0;
    OpReader read = [&](std::vector<Op>& out, std::size_t max) -> std::size_t {
      if (again) return again->read(out, max);
      const auto& ops = snapshot->ops;
      std::size_t n = std::min(max, ops.size() - at);
      out.insert(out.end(), ops.begin() + static_cast<std::ptrdiff_t>(at), ops.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      return n;
    };
    // A snapshot's origins by (trace entry, kind): the writer gets copies of its ops.
    std::unordered_map<std::uint64_t, std::string> origin_of_entry;
    if (snapshot)
      for (std::size_t i = 0; i < snapshot->ops.size(); ++i)
        if (snapshot->op_origin[i] && snapshot->ops[i].source_line)
          origin_of_entry[snapshot->ops[i].source_line * 2 + (snapshot->ops[i].kind == Op::Kind::Alloc)] =
              snapshot->origins[snapshot->op_origin[i]];
    OpOrigin origin = [&](const Op& op) -> std::string {
      if (again) return again->origin(op);
      auto it = origin_of_entry.find(op.source_line * 2 + (op.kind == Op::Kind::Alloc));
      return it == origin_of_entry.end() ? std::string() : it->second;
    };
    try {
      SnapshotExportSummary sum = export_snapshot(a.export_snapshot, read, a.allocator, options,
                                                  report.device.capacity_bytes, origin, placements);
      if (!a.quiet)
        std::cerr << fmt::format("gpumembench: the simulated run written as a PyTorch snapshot to {} ({} trace entries, "
                                 "{} OOMs, {} segments at the end)\n",
                                 a.export_snapshot, sum.entries, sum.ooms, sum.segments);
    } catch (const std::runtime_error& e) {
      if (dynamic_cast<const TraceError*>(&e)) throw;
      throw UsageError(fmt::format("--export-snapshot: {}", e.what()));
    }
  }
  if (!a.output.empty())
    write_reports(report, a.output, a.format.empty() ? std::vector<std::string>{"md", "csv", "json"}
                                                     : parse_formats(a.format));
  if (!report.cases[0].error.empty()) {
    std::cerr << "gpumembench: " << report.cases[0].error << "\n";
    return 1;
  }
  return 0;
}

// Several results side by side. Without --output the chosen formats (default md) go to
// stdout; with it, files go there and the Markdown table to stdout.
int run_compare(const std::vector<std::string>& inputs, const std::string& output_flag,
                const std::string& format_flag, const std::string& match_flag) {
  std::vector<CompareInput> loaded;
  for (const auto& path : inputs) loaded.push_back(load_compare_input(path));
  const CompareMatch match = match_flag == "allocator" ? CompareMatch::Allocator
                             : match_flag == "label"   ? CompareMatch::Label
                                                       : CompareMatch::Auto;
  Comparison c = compare_results(std::move(loaded), match);
  if (output_flag.empty()) {
    std::cout << compare_text(c, format_flag.empty() ? std::vector<std::string>{"md"} : parse_formats(format_flag));
    return 0;
  }
  std::vector<std::string> formats =
      format_flag.empty() ? std::vector<std::string>{"md", "csv", "json"} : parse_formats(format_flag);
  std::cout << compare_markdown(c);
  write_compare(c, output_flag, formats);
  return 0;
}

// Every subcommand in one place: the no-argument message and `gpumembench help` list them all.
const char* kSynopsis =
    "  gpumembench --config FILE [--device auto|sim|cuda] [--capacity SIZE] [--steps N] [--allocator NAME]...\n"
    "              [--output DIR] [--format md,csv,json,latex] [--quiet]     run a config's workloads x allocators\n"
    "  gpumembench replay --trace FILE --allocator NAME [--alloc-conf STR] [--capacity SIZE] [--device ...]\n"
    "              [--timeline FILE] [--output DIR] [--format ...]           one allocation trace, one allocator\n"
    "  gpumembench frontier --config FILE [--param capacity|batch|seq_len] [--lo V] [--hi V] [--resolution V]\n"
    "              [--steps N] [--allocator NAME]... [--device ...] [--capacity SIZE] [--output DIR]\n"
    "                                                    smallest capacity (largest batch/seq_len) without an OOM\n"
    "  gpumembench reduce --trace FILE|--config FILE --allocator NAME [--alloc-conf STR] [--capacity SIZE]\n"
    "              [--contrast-alloc-conf STR] [--output DIR]   shrink the first OOM to a small reproducer\n"
    "  gpumembench compare RESULTS RESULTS... [--match label|allocator] [--output DIR] [--format ...]\n"
    "                                                    runs side by side\n"
    "  gpumembench help [replay|frontier|compare|reduce]        this help, or a subcommand's\n"
    "  gpumembench --version\n";

const char* kRunExamples =
    "\nExamples:\n"
    "  gpumembench --config configs/hole_pattern.yaml                 # cuda if a GPU is visible, else sim\n"
    "  gpumembench --config configs/dynamic_seq.yaml --device sim --steps 50 --allocator caching\n"
    "  gpumembench --config configs/fragmentation_oom.yaml --format md,latex --output out/frag\n"
    "\nSubcommands: replay, frontier, compare, help (gpumembench help SUBCOMMAND).\n"
    "Exit status: 0 every case ran (an OOM is a result, in the tables); 2 bad usage, config or trace\n"
    "(nothing runs, nothing is written); 1 a case could not run, or an internal error.\n";

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"gpumembench: how GPU memory allocators use memory, where they run out (fragmentation or "
               "capacity) and how fast they are: workloads x allocators, on a real or a simulated GPU",
               "gpumembench"};
  app.set_version_flag("--version", std::string("gpumembench ") + GMB_VERSION);
  app.footer(kRunExamples);
  std::string config, device, output, format, capacity;
  bool quiet = false;
  app.add_option("--config", config, "YAML config: its workloads x allocators are the cases (configs/ has examples)")
      ->check(CLI::ExistingFile);
  app.add_option("--device", device,
                 "auto (default): cuda if a GPU is visible, else sim; sim: a simulated GPU of the config's capacity "
                 "(throughput and native allocators' memory modeled); cuda: the real GPU")
      ->check(CLI::IsMember({"auto", "sim", "cuda"}));
  app.add_option("--output", output, "output folder (default results/<config name>-<UTC time>/)");
  app.add_option("--format", format,
                 "comma-separated: md, csv, json, latex (results.tex for a paper); default md,csv,json or the "
                 "config's output.formats");
  app.add_option("--capacity", capacity,
                 "memory left to the allocator, e.g. 24GiB, 1.75GiB, 512MiB (sim: the device's size; cuda: a "
                 "ballast takes the rest); replaces the config's capacity or capacity sweep");
  app.add_flag("--quiet,-q", quiet, "no progress line or notices on stderr");
  std::vector<std::string> only_allocators;
  app.add_option("--allocator", only_allocators,
                 "run only this allocator of the config: a name (every setting of it) or a row label as the "
                 "tables print it, e.g. 'caching[expandable_segments:True]'; repeat for more")
      ->allow_extra_args(false);
  std::uint64_t steps = 0;
  auto step_count = CLI::Validator(
      [](const std::string& v) {
        return v.empty() || v.find_first_not_of("0123456789") != std::string::npos ||
                       v.find_first_not_of('0') == std::string::npos
                   ? "'" + v + "' is not a step count (a whole number, 1 or more)"
                   : std::string();
      },
      "N");
  app.add_option("--steps", steps, "run at most N steps of each workload (a shorter run of the same config)")
      ->check(step_count);

  auto* replay = app.add_subcommand(
      "replay", "replay a recorded allocation trace (native CSV, RMM log, PyTorch snapshot) through one allocator");
  replay->footer(
      "\nExamples:\n"
      "  gpumembench replay --trace configs/traces/fragmentation_oom/fragmentation_oom.csv --allocator caching "
      "--capacity 1792MiB\n"
      "  gpumembench replay --trace run.pickle.gz --allocator caching --alloc-conf expandable_segments:True "
      "--capacity 40GiB --export-snapshot whatif.pickle\n"
      "The trace is replayed with on_oom continue: every OOM is recorded and the replay goes on. A PyTorch snapshot "
      "is replayed with its own allocator settings unless --alloc-conf is given; with them, the replay is compared "
      "with the recorded run (\"reproduces the recorded run: yes\" or the first difference).\n");
  ReplayArgs ra;
  replay->add_option("--trace", ra.trace,
                     "the trace: native CSV (header action,id,bytes[,stream]), RMM log or PyTorch memory snapshot, "
                     "plain or gzip (the format is detected from the content)")
      ->required()
      ->check(CLI::ExistingFile);
  replay->add_option("--allocator", ra.allocator, "allocator name: " + allocator_names())->required();
  auto* conf_opt = replay->add_option("--alloc-conf", ra.alloc_conf,
                                      "caching only: PyTorch's PYTORCH_CUDA_ALLOC_CONF string, e.g. expandable_segments:True (default: a snapshot's own)");
  replay->add_option("--capacity", ra.capacity, "memory left to the allocator, e.g. 24GiB (default: the whole device)");
  replay->add_option("--memory-limit", ra.memory_limit,
                     "caching: the allocator's limit below the capacity, as torch.cuda.set_per_process_memory_fraction "
                     "sets it (bytes = fraction x the card), e.g. 16GiB");
  replay->add_option("--device", ra.device, "auto (default), sim or cuda")->check(CLI::IsMember({"auto", "sim", "cuda"}));
  replay->add_option("--trace-device", ra.trace_device,
                     "PyTorch snapshot: the device whose trace to replay (default: the one with the most events)")
      ->check(CLI::NonNegativeNumber);
  replay->add_option("--timeline", ra.timeline, "write allocated/reserved bytes after every event to this CSV");
  replay->add_option("--export-snapshot", ra.export_snapshot,
                     "write the simulated run as a PyTorch memory snapshot (opens in PyTorch's memory_viz)");
  replay->add_option("--export-rmm-log", ra.export_rmm_log,
                     "write the replayed run as an RMM memory event log (Thread,Time,Action,Pointer,Size,Stream)");
  replay->add_option("--output", ra.output, "also write results files (and oom/ block maps) into this folder");
  replay->add_option("--format", ra.format, "formats written to --output: md, csv, json, latex (default md,csv,json)");
  replay->add_flag("--quiet,-q", ra.quiet, "no notices on stderr");

  auto* compare = app.add_subcommand(
      "compare",
      "put several results.json side by side (cases matched by label or allocator, ratios to the first; fractions "
      "as differences in percentage points)");
  compare->footer(
      "\nExamples:\n"
      "  gpumembench compare results/h200/dynamic_seq results/h200/fixed_seq     # matched by allocator\n"
      "  gpumembench compare a/results.json b/results.json --format latex --output out/cmp\n");
  std::vector<std::string> compare_inputs;
  compare->add_option("results", compare_inputs, "results.json files (or folders holding one), two or more")
      ->required();
  compare->add_option("--output", output, "write compare.{md,csv,json,tex} here (default: print to stdout)");
  compare->add_option("--format", format, "comma-separated formats: md, csv, json, latex (default md; with --output md,csv,json)");
  std::string compare_match;
  compare->add_option("--match", compare_match,
                      "pair cases by 'label' (the same case on two devices or versions) or by 'allocator' "
                      "setting (the same allocators on two workloads, e.g. dynamic vs fixed lengths); default: "
                      "allocator when the inputs' workloads differ, else label")
      ->check(CLI::IsMember(compare_match_names()));

  FrontierCliArgs frontier_args;
  auto* frontier = add_frontier_command(app, frontier_args);
  frontier->add_option("--steps", frontier_args.steps,
                       "run at most N steps of each workload in every probe (as for a run)")
      ->check(step_count);
  frontier->add_option("--allocator", frontier_args.allocators,
                       "search only this allocator of the config (name or row label, as for a run); repeat for more")
      ->allow_extra_args(false);

  ReduceCliArgs reduce_args;
  auto* reduce = add_reduce_command(app, reduce_args);

  // `gpumembench help [SUBCOMMAND]` is answered before parsing: CLI11 would take "help replay"
  // for the replay subcommand itself. It is registered so that --help lists it.
  auto* help = app.add_subcommand("help", "this help, or a subcommand's: gpumembench help frontier");
  help->allow_extras();
  if (argc >= 2 && std::string(argv[1]) == "help") {
    const std::string topic = argc >= 3 ? argv[2] : "";
    if (!topic.empty() && topic != "replay" && topic != "frontier" && topic != "compare" && topic != "reduce") {
      std::cerr << "gpumembench help: '" << topic << "' is not a subcommand (valid: replay, frontier, compare, reduce)\n";
      return 2;
    }
    std::cout << (topic.empty() ? app.help() : app.get_subcommand(topic)->help());
    if (topic.empty()) std::cout << "\nUsage:\n" << kSynopsis;
    return 0;
  }

  if (argc <= 1) {
    std::cerr << "gpumembench: nothing to run. Usage:\n" << kSynopsis
              << "Try: gpumembench --config configs/hole_pattern.yaml --device sim\n"
                 "More: gpumembench help, gpumembench help SUBCOMMAND.\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  const std::string cmd = command_line(argc, argv);
  try {
    if (help->parsed()) {  // after other flags: gpumembench --quiet help
      std::cout << app.help() << "\nUsage:\n" << kSynopsis;
      return 0;
    }
    if (compare->parsed()) return run_compare(compare_inputs, output, format, compare_match);
    if (frontier->parsed()) return run_frontier_command(frontier_args, cmd);
    if (reduce->parsed()) return run_reduce_command(reduce_args, cmd);
    if (replay->parsed()) {
      ra.alloc_conf_given = conf_opt->count() > 0;
      return run_replay(ra, cmd);
    }
    if (config.empty()) {
      std::cerr << "gpumembench: --config FILE is required to run a config. Usage:\n" << kSynopsis;
      return 2;
    }
    return run_config(config, device, capacity, output, format, quiet, cmd, steps, only_allocators);
  } catch (const ConfigError& e) {
    std::cerr << "gpumembench: " << e.what() << "\n";
    return 2;
  } catch (const TraceError& e) {
    std::cerr << "gpumembench: " << e.what() << "\n";
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "gpumembench: " << e.what() << "\n";
    return 2;
  } catch (const CompareError& e) {
    std::cerr << "gpumembench compare: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gpumembench: internal error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace gmb
