// `gpumembench frontier`: the OOM frontier of a config's workloads x allocators.
#include <ctime>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/units.h"
#include "devices/cuda_path.h"
#include "harness/cli/config_option.h"
#include "harness/cli/frontier_cli.h"
#include "harness/cli/size_flag.h"
#include "harness/io/output_folder.h"
#include "harness/frontier/frontier.h"
#include "harness/report/report.h"

namespace gmb {

namespace {

// A value of --lo/--hi/--resolution: a size for capacity, a positive integer otherwise.
std::uint64_t parse_value(const std::string& flag, const std::string& text, const std::string& param) {
  if (param == "capacity") {
    return parse_size_flag(flag, text);
  }
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 18 ||
      std::stoull(text) == 0)
    throw std::invalid_argument(fmt::format("{}: '{}' is not a positive integer ({} is a count)", flag, text, param));
  return std::stoull(text);
}

}  // namespace

CLI::App* add_frontier_command(CLI::App& app, FrontierCliArgs& a) {
  auto* f = app.add_subcommand(
      "frontier", "OOM frontier: per allocator, the smallest capacity (or largest batch / seq_len) without an OOM");
  f->footer(
      "\nExamples:\n"
      "  gpumembench frontier --config fragmentation_oom --device sim\n"
      "  gpumembench frontier --config dynamic_seq --param batch --capacity 40GiB --steps 20 "
      "--allocator caching\n"
      "Writes frontier.{md,csv,json} (every probe, both neighbours of the frontier actually run).\n");
  f->add_option("--config", a.config,
                 "YAML config, a file or a shipped config's name (its `frontier:` section gives defaults)")
      ->required()
      ->transform(shipped_config_lookup());
  f->add_option("--param", a.param,
                "what to search: capacity (default; the smallest that runs every step), batch or seq_len (the "
                "largest that does; transformer workloads)")
      ->check(CLI::IsMember(frontier_params()));
  f->add_option("--lo", a.lo,
                "lower end of the search: a size for capacity (default: the peak allocated bytes of the run "
                "that passes at --hi, rounded down to the grid), a count for batch/seq_len (default: 1)");
  f->add_option("--hi", a.hi,
                "upper end: a size for capacity (default: the config's capacity, doubled until a run passes), a "
                "count for batch/seq_len (default: the config's value, doubled until a run fails)");
  f->add_option("--resolution", a.resolution,
                "grid of the search: the answer is exact to this step (default 2MiB for capacity, 1 for batch/seq_len)");
  f->add_option("--device", a.device, "auto (default), sim or cuda")->check(CLI::IsMember({"auto", "sim", "cuda"}));
  f->add_option("--capacity", a.capacity,
                "batch/seq_len only: the capacity to search at, e.g. 40GiB (default: the config's)");
  f->add_option("--output", a.output, "output folder (default results/<config name>-frontier-<UTC time>/)");
  f->add_flag("--overwrite", a.overwrite, "replace the frontier files of an earlier search in --output DIR");
  f->add_flag("--quiet,-q", a.quiet, "no progress on stderr");
  return f;
}

int run_frontier_command(const FrontierCliArgs& a, const std::string& command_line) {
  Config config = load_config(a.config);  // ConfigError: the caller reports it (exit 2)
  FrontierReport report;
  std::optional<OutputFolder> folder;  // held until the files are written
  try {
    if (a.steps) config.run.max_steps = a.steps;
    select_allocators(config, a.allocators);  // std::invalid_argument: exit 2
    FrontierSpec spec = config.frontier.value_or(FrontierSpec{});
    if (!a.param.empty() && a.param != spec.param) spec = FrontierSpec{a.param};  // the YAML's range is in other units
    if (!a.lo.empty()) spec.lo = parse_value("--lo", a.lo, spec.param);
    if (!a.hi.empty()) spec.hi = parse_value("--hi", a.hi, spec.param);
    if (!a.resolution.empty()) spec.resolution = parse_value("--resolution", a.resolution, spec.param);
    std::optional<Bytes> capacity;
    if (!a.capacity.empty()) capacity = parse_value("--capacity", a.capacity, "capacity");
    if (capacity && spec.param == "capacity")  // it would be ignored: the search sets the capacity
      throw std::invalid_argument(
          "--capacity goes with --param batch or seq_len; a capacity search takes its range from --lo and --hi");
    DeviceChoice choice = config.device.choice;
    if (a.device == "sim") choice = DeviceChoice::Sim;
    if (a.device == "cuda") choice = DeviceChoice::Cuda;
    if (a.device == "auto") choice = DeviceChoice::Auto;
    if (choice == DeviceChoice::Cuda && !cuda_device_available())
      throw std::invalid_argument(cuda_unavailable_message());
    if (choice == DeviceChoice::Auto) {
      choice = resolve_device(choice);
      if (choice == DeviceChoice::Sim && !a.quiet)
        std::cerr << "gpumembench: no GPU visible; running on the simulated device (--device sim)\n";
    }
    if (a.overwrite && a.output.empty()) throw std::invalid_argument("--overwrite applies to --output DIR");
    // The folder is taken before the search, which can run for hours: one that is in use, not
    // empty or not writable is refused now (exit 2), and no other run writes there meanwhile.
    if (a.output.empty())
      folder.emplace(OutputFolder::fresh_default(
          fmt::format("results/{}-frontier-{}", config.name, utc_now("%Y%m%dT%H%M%SZ"))));
    else
      folder.emplace(a.output, a.overwrite ? OutputMode::Overwrite : OutputMode::Fresh, "--output", frontier_files());
    auto progress = [&](const FrontierRow& row, const FrontierProbe& p) {
      if (a.quiet) return;
      std::string v = frontier_value_text(spec.param, p.value);
      std::string what = p.passed ? "ran every step"
                         : p.oom  ? fmt::format("{} OOM at step {}", to_string(p.oom->kind), p.oom->step)
                                  : "failed: " + p.error;
      std::cerr << fmt::format("frontier: {} {} = {}: {}\n", row.allocator_label, spec.param, v, what);
    };
    report = run_frontier(config, spec, choice, capacity, progress);
  } catch (const std::invalid_argument& e) {
    std::cerr << "gpumembench: " << e.what() << "\n";
    return 2;
  }
  report.tool_version = GMB_VERSION;
  report.command_line = command_line;
  report.started_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
  const std::string dir = folder->path();
  std::cout << frontier_markdown(report);
  write_frontier_reports(report, dir);
  if (!a.quiet) std::cerr << "gpumembench: frontier written to " << dir << "/\n";
  bool error = false;
  for (const auto& row : report.rows)
    if (!row.error.empty()) {
      std::cerr << "gpumembench: frontier of " << row.allocator_label << " stopped: " << row.error << "\n";
      error = true;
    }
  return error ? 1 : 0;
}

}  // namespace gmb
