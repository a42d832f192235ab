#include "harness/cli.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "allocators/registry.h"
#include "allocators/units.h"
#include "harness/compare.h"
#include "harness/config.h"
#include "harness/frontier.h"
#include "harness/report.h"
#include "harness/workload_need.h"
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
  void step(std::uint64_t repeat, std::uint64_t step, std::uint64_t steps) {
    if (!enabled_ || steps == 0) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(200) && step != steps) return;
    last_ = now;
    const double in_case = std::chrono::duration<double>(now - case_start_).count();
    const double elapsed = std::chrono::duration<double>(now - run_start_).count();
    const double done = double(repeat * steps + step) / double(repeats_ * steps);
    std::string left = "?";
    if (done > 0) {
      const double this_case = in_case / done;  // the whole case at its pace so far
      const double mean_case = (elapsed - in_case + this_case) / double(index_ + 1);
      left = duration_text(this_case - in_case + mean_case * double(cases_ - index_ - 1));
    }
    auto line_with = [&](const std::string& label) {
      return fmt::format("case {}/{} {} | run {}/{} | step {}/{} | {} elapsed, ~{} left", index_ + 1, cases_, label,
                         repeat + 1, repeats_, step, steps, duration_text(elapsed), left);
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

// --allocator: run only the config's allocators named (every setting of that allocator) or
// labelled (one setting, as the tables print it) by one of `flags`.
void keep_allocators(Config& config, const std::vector<std::string>& flags) {
  if (flags.empty()) return;
  std::vector<std::string> labels;
  for (const auto& a : config.allocators) labels.push_back(allocator_label(a.name, a.options));
  auto matches = [&](std::size_t i, const std::string& flag) {
    return flag == config.allocators[i].name || flag == labels[i];
  };
  for (const auto& f : flags) {
    bool known = false;
    for (std::size_t i = 0; i < labels.size(); ++i) known = known || matches(i, f);
    if (!known)
      throw UsageError(fmt::format("--allocator: '{}' is not an allocator of {} (valid: {})", f, config.path,
                                   fmt::join(labels, ", ")));
  }
  std::vector<AllocatorSpec> kept;
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (std::any_of(flags.begin(), flags.end(), [&](const std::string& f) { return matches(i, f); }))
      kept.push_back(config.allocators[i]);
  config.allocators = std::move(kept);
}

int run_config(const std::string& config_path, const std::string& device_flag, const std::string& capacity_flag,
               const std::string& output_flag, const std::string& format_flag, bool quiet,
               const std::string& cmd, std::uint64_t steps_flag, const std::vector<std::string>& allocator_flags) {
  Config config = load_config(config_path);  // throws ConfigError: nothing has run
  if (steps_flag) config.run.max_steps = steps_flag;
  keep_allocators(config, allocator_flags);
  std::vector<std::string> formats = {"md", "csv", "json"};
  if (!config.formats.empty()) formats = config.formats;
  if (!format_flag.empty()) formats = parse_formats(format_flag);
  DeviceSpec spec = config.device;
  if (!device_flag.empty()) spec.choice = parse_device_choice(device_flag);
  if (!capacity_flag.empty()) spec.capacity_bytes = parse_capacity(capacity_flag);
  spec = choose_device(spec, quiet);

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
        std::string label = allocator_label(a.name, a.options) + " x " + w.kind + at;
        progress.start_case(i, label);
        report.cases.push_back(
            run_case(cs, case_spec, config.run, [&](auto r, auto s, auto n) { progress.step(r, s, n); }));
        report.cases.back().label += at;
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

int run_replay(const std::string& trace_path, const std::string& allocator, const std::string& alloc_conf,
               const std::string& capacity_flag, const std::string& device_flag, const std::string& timeline,
               const std::string& output_flag, const std::string& format_flag, bool quiet, const std::string& cmd) {
  if (!find_allocator(allocator))
    throw UsageError(fmt::format("--allocator: unknown allocator '{}' (valid: {})", allocator, allocator_names()));
  AllocatorOptions options;
  if (!alloc_conf.empty()) {
    if (allocator != "caching")
      throw UsageError(fmt::format("--alloc-conf applies to the caching allocator, not '{}'", allocator));
    options["alloc_conf"] = alloc_conf;
  }
  DeviceSpec spec;
  if (!device_flag.empty()) spec.choice = parse_device_choice(device_flag);
  if (!capacity_flag.empty()) spec.capacity_bytes = parse_capacity(capacity_flag);
  Trace trace = read_trace(trace_path);  // throws TraceError naming the line
  {
    // Check the options before running anything.
    SimDeviceOptions o;
    o.capacity_bytes = 1 * GiB;
    auto probe = make_sim_device(o);
    try {
      make_allocator(allocator, *probe, options);
    } catch (const OptionError& e) {
      throw UsageError(fmt::format("--alloc-conf: {} (valid: {})", e.what(), e.valid));
    }
  }
  spec = choose_device(spec, quiet);
  RunSettings settings;
  settings.on_oom = OnOom::Continue;
  settings.timeline = !timeline.empty();
  RunReport report;
  report.tool_version = GMB_VERSION;
  report.config_name = "replay";
  report.config_path = trace_path;
  report.command_line = cmd;
  report.started_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
  report.on_oom = to_string(settings.on_oom);
  auto shared = std::make_shared<Trace>(std::move(trace));
  CaseSpec cs{allocator, options, [shared] { return make_trace_workload(*shared); }};
  CaseResult result = run_case(cs, spec, settings);
  {
    auto device = make_device(spec);
    report.device = device->info();
  }
  report.cases.push_back(std::move(result));
  if (!timeline.empty()) {
    write_timeline_csv(timeline + ".tmp", report.cases[0].timeline);
    std::filesystem::rename(timeline + ".tmp", timeline);
  }
  std::cout << markdown_table(report);
  if (!output_flag.empty())
    write_reports(report, output_flag, format_flag.empty() ? std::vector<std::string>{"md", "csv", "json"}
                                                           : parse_formats(format_flag));
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

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"gpumembench: GPU memory allocator benchmark (workloads x allocators, real or simulated GPU)",
               "gpumembench"};
  app.set_version_flag("--version", std::string("gpumembench ") + GMB_VERSION);
  std::string config, device, output, format, capacity;
  bool quiet = false;
  app.add_option("--config", config, "YAML config naming workloads and allocators")->check(CLI::ExistingFile);
  app.add_option("--device", device, "auto (default): cuda if a GPU is visible, else sim")
      ->check(CLI::IsMember({"auto", "sim", "cuda"}));
  app.add_option("--output", output, "output directory (default results/<config name>-<UTC time>/)");
  app.add_option("--format", format, "comma-separated formats: md, csv, json, latex (default md,csv,json)");
  app.add_option("--capacity", capacity, "memory left to the allocator, e.g. 24GiB (sim: the device size)");
  app.add_flag("--quiet,-q", quiet, "no progress or notices on stderr");
  std::vector<std::string> only_allocators;
  app.add_option("--allocator", only_allocators,
                 "run only this allocator of the config: a name (every setting) or a label as the tables "
                 "print it, e.g. 'caching[expandable_segments:True]'; repeat for more")
      ->allow_extra_args(false);
  std::uint64_t steps = 0;
  app.add_option("--steps", steps, "run at most N steps of each workload (a shorter run of a config)")
      ->check(CLI::Validator(
          [](const std::string& v) {
            return v.empty() || v.find_first_not_of("0123456789") != std::string::npos ||
                           v.find_first_not_of('0') == std::string::npos
                       ? "'" + v + "' is not a step count (a whole number, 1 or more)"
                       : std::string();
          },
          "N"));

  auto* replay = app.add_subcommand("replay", "replay a native CSV allocation trace through one allocator");
  std::string trace, allocator, alloc_conf, timeline;
  replay->add_option("--trace", trace, "trace CSV (action,id,bytes,stream)")->required()->check(CLI::ExistingFile);
  replay->add_option("--allocator", allocator, "allocator name: " + allocator_names())->required();
  replay->add_option("--alloc-conf", alloc_conf, "PyTorch option string for the caching allocator");
  replay->add_option("--capacity", capacity, "memory left to the allocator, e.g. 24GiB");
  replay->add_option("--device", device, "auto, sim or cuda")->check(CLI::IsMember({"auto", "sim", "cuda"}));
  replay->add_option("--timeline", timeline, "write the per-event timeline CSV here");
  replay->add_option("--output", output, "also write results files into this directory");
  replay->add_option("--format", format, "formats for --output");
  replay->add_flag("--quiet,-q", quiet, "no notices on stderr");

  auto* compare = app.add_subcommand(
      "compare",
      "put several results.json side by side (cases matched by label or allocator, ratios to the first; fractions "
      "as differences in percentage points)");
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  const std::string cmd = command_line(argc, argv);
  try {
    if (compare->parsed()) return run_compare(compare_inputs, output, format, compare_match);
    if (frontier->parsed()) return run_frontier_command(frontier_args, cmd);
    if (replay->parsed())
      return run_replay(trace, allocator, alloc_conf, capacity, device, timeline, output, format, quiet, cmd);
    if (config.empty()) {
      std::cerr << "gpumembench: --config FILE is required (or the replay subcommand); see --help\n";
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
