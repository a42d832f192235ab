#include "harness/cli/cli.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <future>
#include <iostream>
#include <unordered_map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "about/build_info.h"
#include "allocators/caching/alloc_conf.h"
#include "allocators/registry.h"
#include "common/units.h"
#include "devices/call_log_file.h"
#include "devices/cuda_path.h"
#include "harness/cli/config_option.h"
#include "harness/cli/count_flag.h"
#include "harness/cli/frontier_cli.h"
#include "harness/cli/plot_command.h"
#include "harness/cli/progress.h"
#include "harness/cli/merge_cli.h"
#include "harness/cli/run_plan.h"
#include "harness/cli/sweep_cli.h"
#include "harness/cli/shipped_configs.h"
#include "harness/cli/metrics_flag.h"
#include "harness/cli/size_flag.h"
#include "harness/compare/compare.h"
#include "harness/config/config.h"
#include "harness/export/rmm_log_writer.h"
#include "harness/export/snapshot_export.h"
#include "harness/frontier/frontier.h"
#include "harness/io/output_folder.h"
#include "harness/cli/reduce_cli.h"
#include "harness/report/markdown_report.h"
#include "harness/report/report.h"
#include "harness/report/timeline_report.h"
#include "common/text_excerpt.h"
#include "harness/run/fragmentation_metrics.h"
#include "harness/run/snapshot_check.h"
#include "harness/run/stop_request.h"
#include "harness/run/workload_need.h"
#include "harness/sweep/case_plan.h"
#include "harness/sweep/sweep.h"
#include "workloads/pytorch_snapshot.h"
#include "workloads/trace.h"
#include "harness/run/json_text.h"

namespace gmb {
namespace {

// A size flag's value (size_flag.h); a bad one is a usage error (exit 2).
Bytes size_flag(std::string_view flag, const std::string& text) {
  try {
    return parse_size_flag(flag, text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

// An argument as a shell reads it back: quoted where it holds anything but plain characters.
std::string shell_word(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=@,+-") ==
                          std::string::npos)
    return arg;
  std::string q = "'";
  for (char ch : arg) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// The command line to continue a stopped run: this one with `--resume DIR` for its folder.
std::string resume_command(int argc, char** argv, const std::string& dir) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--output" || arg == "--resume") {
      ++i;
      continue;
    }
    if (arg == "--overwrite" || arg.rfind("--output=", 0) == 0 || arg.rfind("--resume=", 0) == 0) continue;
    s += (s.empty() ? "" : " ") + shell_word(arg);
  }
  return s + " --resume " + shell_word(dir);
}

int run_config(const RunArgs& a, const std::string& cmd, int argc, char** argv) {
  if (!a.worker_case.empty()) return run_worker_case(a);
  if (!a.resume.empty() && (!a.output.empty() || a.overwrite))
    throw UsageError("--resume DIR continues the run in DIR: it takes neither --output nor --overwrite");
  PlannedRun p = plan_run(a, a.quiet);
  const Config& config = p.config;
  const std::size_t plan_cases = p.cases.size();
  const Shard shard = resolve_shard(a.shard, a.quiet);
  if (!shard.whole()) p.cases = cases_of_shard(p.cases, shard);
  // The baseline of the tables: among the allocators that run.
  const std::vector<std::string> baselines = baseline_choices(config);
  std::string baseline = a.baseline.empty() ? config.baseline : a.baseline;
  if (!baseline.empty() && std::find(baselines.begin(), baselines.end(), baseline) == baselines.end()) {
    if (!a.baseline.empty())
      throw UsageError(fmt::format("--baseline: '{}' is not an allocator of {}{} (valid: {})", baseline, a.config,
                                   a.allocators.empty() ? "" : " that --allocator keeps", join(baselines)));
    if (!a.quiet)
      std::cerr << "gpumembench: output.baseline " << baseline << " does not run (--allocator): no baseline column\n";
    baseline.clear();
  }
  std::vector<std::string> formats = {"md", "csv", "json"};
  if (!config.formats.empty()) formats = config.formats;
  if (!a.format.empty()) formats = parse_formats(a.format);
  if (!a.quiet)
    for (const auto& w : config.workloads)
      for (const auto& note : w.notes) std::cerr << "gpumembench: " << note << "\n";
  // Checked before the folder is taken: a bad --jobs or --gpus writes nothing.
  const bool in_workers = a.jobs > 0 || !a.gpus.empty() || (p.spec.choice == DeviceChoice::Cuda && !a.in_process);
  if (in_workers) (void)worker_setup(a, p, baseline, formats, "", cmd);

  RunReport report;
  report.tool_version = GMB_VERSION;
  report.config_name = config.name;
  report.config_path = a.config;
  report.command_line = cmd;
  report.started_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
  report.on_oom = to_string(config.run.on_oom);
  report.repeat = config.run.repeat;
  report.capacity_sweep = p.capacity_sweep;
  report.baseline = baseline;
  report.metrics = a.metrics.empty() ? config.metrics : parse_metrics_flag(a.metrics);
  if (!shard.whole()) {
    report.shard_index = shard.index;
    report.shard_count = shard.count;
    report.shard_source = shard.source;
    report.plan_cases = plan_cases;
  }
  if (in_workers && p.spec.choice == DeviceChoice::Cuda) {
    // This process takes no GPU memory (a context here would share GPU 0 with a worker): the
    // workers' case files describe the device.
    report.device.kind = DeviceKind::Cuda;
    report.device.name = "GPU";
  } else {
    auto device = make_device(p.spec);
    report.device = device->info();
  }
  // The folder is taken before anything runs (exit 2 for one that cannot be used).
  std::optional<OutputFolder> folder;
  if (!a.resume.empty()) folder.emplace(a.resume, OutputMode::Resume, "--resume");
  else if (!a.output.empty()) folder.emplace(a.output, a.overwrite ? OutputMode::Overwrite : OutputMode::Fresh, "--output");
  else
    folder.emplace(OutputFolder::fresh_default(fmt::format("results/{}-{}{}", config.name, utc_now("%Y%m%dT%H%M%SZ"),
                                                           shard.whole() ? "" : fmt::format("-shard{}of{}", shard.index, shard.count))));
  const std::string out_dir = folder->path();
  set_stop_hint(fmt::format("gpumembench: the finished cases are in {}/cases/; to run the others: {}", out_dir,
                            resume_command(argc, argv, out_dir)));
  install_stop_handlers();

  const CaseFiles files{out_dir, plan_cases, formats};
  const bool show = !a.quiet && isatty(STDERR_FILENO);
  SweepResult sweep;
  if (in_workers) {
    const WorkerSetup workers = *worker_setup(a, p, baseline, formats, out_dir, cmd);
    SweepProgress progress(show, p.cases.size(), workers.slots.size());
    WorkerObserver observer{[&](std::size_t i, const std::string& slot) { progress.start_case(i, slot); },
                            [&](std::size_t i, auto r, auto s, auto n) { progress.step(i, r, s, n); },
                            [&](std::size_t i) { progress.end_case(i); }};
    sweep = run_sweep_in_workers(config, p.cases, std::move(report), files, !a.resume.empty(), workers, observer);
    progress.clear();
  } else {
    Progress progress(show, p.cases.size(), config.run.repeat);
    std::size_t position = 0;  // in this run's cases (a shard's are a part of the plan)
    SweepObserver observer{[&](std::size_t, const std::string& label) { progress.start_case(position++, label); },
                           [&](auto r, auto s, auto n) { progress.step(r, s, n); }, [&] { progress.end_case(); }};
    sweep = run_sweep(config, p.spec, p.cases, std::move(report), files, !a.resume.empty(), observer);
  }
  if (!a.quiet) {
    for (const auto& note : sweep.notes) std::cerr << "gpumembench: " << note << "\n";
    if (sweep.reused)
      std::cerr << fmt::format("gpumembench: {} of {} cases taken from {}/cases (done before), {} run now\n",
                               sweep.reused, p.cases.size(), out_dir, sweep.ran);
  }
  if (sweep.stopped) {
    const std::size_t done = sweep.report.cases.size();
    const int sig = stop_signal() ? stop_signal() : SIGINT;
    std::cerr << fmt::format("gpumembench: stopped by {} after {} of {} cases; their results are in {}/cases/.\n"
                             "gpumembench: to run the other {}: {}\n",
                             sig == SIGTERM ? "SIGTERM" : "SIGINT", done, p.cases.size(), out_dir,
                             p.cases.size() - done, resume_command(argc, argv, out_dir));
    return 128 + sig;
  }
  std::cout << markdown_table(sweep.report);
  {
    SignalsHeld held;
    write_reports(sweep.report, out_dir, formats);
  }
  if (!a.quiet) std::cerr << "gpumembench: results written to " << out_dir << "/\n";
  bool any_error = false;
  for (const auto& c : sweep.report.cases)
    if (!c.error.empty()) {
      std::cerr << "gpumembench: case " << c.label << " failed: " << c.error << "\n";
      any_error = true;
    }
  return any_error ? 1 : 0;
}

// `gpumembench plan`: the cases of a run as JSON lines, with their ids; nothing runs.
int run_plan(const RunArgs& a) {
  PlannedRun p = plan_run(a, true);
  // The shard a run with these flags would take: --shard, else the launcher's environment.
  const Shard shard = resolve_shard(a.shard, true);
  if (!shard.whole()) p.cases = cases_of_shard(p.cases, shard);
  for (const auto& c : p.cases) std::cout << json_text(plan_json(c)) << "\n";
  return 0;
}

// "recorded run: 2 failed allocations (events 17, 40); replayed: 3 OOMs (first at event 24)".
std::string recorded_vs_replayed(const CaseResult& c) {
  const RecordedOoms& rec = *c.recorded_ooms;
  std::string events;
  for (std::size_t i = 0; i < rec.events.size() && i < 10; ++i) events += (i ? ", " : "") + std::to_string(rec.events[i]);
  if (rec.events.size() > 10 || rec.count > rec.events.size()) events += ", ...";
  std::string line = fmt::format("recorded run: {} failed allocation{}{}{}", rec.count, rec.count == 1 ? "" : "s",
                                 events.empty() ? "" : " (event" + std::string(rec.count == 1 ? " " : "s ") + events + ")",
                                 rec.whole_trace ? "" : " in the part of the trace read");
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
  bool quiet = false, overwrite = false;
};

// A file the command will write (--timeline, --export-*): checked before anything runs, so that
// a folder or a missing parent folder is a usage error (exit 2), not a failure after the run.
void check_output_file(const std::string& flag, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw UsageError(fmt::format("{} {}: is a folder, not a file", flag, path));
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw UsageError(fmt::format("{} {}: the folder {} does not exist", flag, path, parent.string()));
}

// Two of the replay's files that are one file (the same path, or a link to it): the second
// would overwrite the first, or the trace being read.
bool same_file(const std::string& x, const std::string& y) {
  namespace fs = std::filesystem;
  if (x.empty() || y.empty()) return false;
  std::error_code ec1, ec2, ec3;
  if (fs::equivalent(x, y, ec1)) return true;
  const fs::path cx = fs::weakly_canonical(fs::absolute(x, ec2), ec2);
  const fs::path cy = fs::weakly_canonical(fs::absolute(y, ec3), ec3);
  return !ec2 && !ec3 && cx == cy;
}

int run_replay(const ReplayArgs& a, const std::string& cmd) {
  check_output_file("--timeline", a.timeline);
  check_output_file("--export-snapshot", a.export_snapshot);
  check_output_file("--export-rmm-log", a.export_rmm_log);
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--timeline", &a.timeline}, {"--export-snapshot", &a.export_snapshot}, {"--export-rmm-log", &a.export_rmm_log}};
  for (std::size_t i = 0; i < std::size(outputs); ++i) {
    if (same_file(*outputs[i].second, a.trace))
      throw UsageError(fmt::format("{} {}: is the trace being replayed; write it elsewhere", outputs[i].first,
                                   printable_text(*outputs[i].second)));
    for (std::size_t j = i + 1; j < std::size(outputs); ++j)
      if (same_file(*outputs[i].second, *outputs[j].second))
        throw UsageError(fmt::format("{} and {} name one file, {}", outputs[i].first, outputs[j].first,
                                     printable_text(*outputs[i].second)));
  }
  if (a.overwrite && a.output.empty()) throw UsageError("--overwrite applies to --output DIR");
  const std::vector<std::string> formats =
      a.format.empty() ? std::vector<std::string>{"md", "csv", "json"} : parse_formats(a.format);
  const AllocatorEntry* entry = find_allocator(a.allocator);
  if (!entry)
    throw UsageError(fmt::format("--allocator: unknown allocator '{}' (valid: {})", a.allocator, allocator_names()));
  if (!a.export_snapshot.empty() && !(entry->traits.exports_as_snapshot && entry->traits.runs_on_sim))
    throw UsageError(fmt::format("--export-snapshot: a run of {} is not a PyTorch snapshot ({}); it writes the runs of "
                                 "{} (--export-rmm-log writes any allocator's)",
                                 a.allocator,
                                 entry->traits.runs_on_sim ? "it maps physical pieces into ranges of its own"
                                                           : "the export replays on sim, where it does not run",
                                 allocator_names_where(&AllocatorTraits::exports_as_snapshot)));
  // PyTorch's settings (and its memory limit) apply to the allocators that take an alloc_conf.
  const bool takes_alloc_conf = entry->traits.accepts_alloc_conf;
  const std::string conf_takers = allocator_names_where(&AllocatorTraits::accepts_alloc_conf);
  if (a.alloc_conf_given && !takes_alloc_conf)
    throw UsageError(fmt::format("--alloc-conf applies to the {} allocator, not '{}'", conf_takers, a.allocator));
  if (!a.memory_limit.empty() && !takes_alloc_conf)
    throw UsageError(fmt::format("--memory-limit applies to the {} allocator, not '{}'", conf_takers, a.allocator));
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
  std::string stale_conf_note;
  const std::string recorded = recorded_alloc_conf(meta, &stale_conf_note);
  // On sim the allocator's OOM message names the recorded GPU ("GPU 1"), as PyTorch's did.
  if (meta.recorded_device > 0) spec.ordinal = meta.recorded_device;
  AllocatorOptions options;
  bool recorded_conf = false;
  if (a.alloc_conf_given) {
    if (!a.alloc_conf.empty()) options["alloc_conf"] = a.alloc_conf;
    if (meta.has_alloc_conf)
      notes.push_back(fmt::format("allocator settings: \"{}\" (--alloc-conf); the recorded ones are \"{}\"",
                                  printable_text(a.alloc_conf), printable_text(recorded)));
  } else if (meta.has_alloc_conf && takes_alloc_conf) {
    if (!meta.alloc_conf_error.empty())
      throw TraceError(a.trace, 0, meta.alloc_conf_error + "; --alloc-conf replaces the recorded allocator settings");
    if (!recorded.empty()) options["alloc_conf"] = recorded;
    recorded_conf = true;
    if (!stale_conf_note.empty()) notes.push_back(stale_conf_note);
    notes.push_back(fmt::format("allocator settings: the recorded \"{}\" (--alloc-conf replaces them)",
                                printable_text(recorded)));
  } else if (meta.has_alloc_conf) {
    notes.push_back(fmt::format("the recorded allocator settings \"{}\" are the caching allocator's; not used by {}",
                                printable_text(recorded), a.allocator));
  }
  // Replayed by PyTorch's allocator with the settings it recorded: the self-check applies.
  const bool own_settings =
      takes_alloc_conf && meta.has_alloc_conf &&
      (recorded_conf || caching::same_decisions(a.alloc_conf, recorded));
  if (!a.memory_limit.empty()) {
    const Bytes limit = size_flag("--memory-limit", a.memory_limit);
    // A fraction of the device is at most all of it (set_per_process_memory_fraction takes 0 to 1).
    const Bytes device_bytes = spec.capacity_bytes ? spec.capacity_bytes
                               : resolve_device(spec.choice) == DeviceChoice::Sim ? kH200CardBytes
                                                                                 : 0;
    if (device_bytes && limit > device_bytes)
      throw UsageError(fmt::format("--memory-limit: {} is more than the device's {} (valid: up to the device's "
                                   "memory; a memory fraction is at most 1)",
                                   format_bytes(limit), format_bytes(device_bytes)));
    options["memory_limit_bytes"] = std::to_string(limit);
    notes.push_back(fmt::format("memory limit: {} (--memory-limit, as set_per_process_memory_fraction sets it)",
                                format_bytes(limit)));
  }
  if (a.capacity.empty() && meta.device_capacity) {
    spec.capacity_bytes = meta.device_capacity;
    notes.push_back(fmt::format("capacity: {}, the recording device's (--capacity replaces it)",
                                format_bytes(meta.device_capacity)));
  } else if (a.capacity.empty() && snapshot) {
    notes.push_back(fmt::format("capacity: {}: a snapshot records neither the device's size nor a memory fraction "
                                "(--capacity gives the card, --memory-limit the fraction's limit)",
                                resolve_device(spec.choice) == DeviceChoice::Sim
                                    ? format_bytes(kH200CardBytes) + ", the simulated device's default (an H200's whole memory)"
                                    : std::string("the whole card")));
  }
  {
    // Check the options before running anything.
    try {
      validate_allocator_options(a.allocator, options);
    } catch (const OptionError& e) {
      if (recorded_conf)
        throw TraceError(a.trace, 0,
                         fmt::format("the recorded allocator settings \"{}\": {} (valid: {}); --alloc-conf replaces them",
                                     printable_text(recorded), e.what(), e.valid));
      throw UsageError(fmt::format("--alloc-conf: {} (valid: {})", e.what(), e.valid));
    }
  }
  spec = choose_device(spec, a.quiet);
  // The folder is taken before the replay runs (exit 2 for one that cannot be used).
  std::optional<OutputFolder> folder;
  if (!a.output.empty()) folder.emplace(a.output, a.overwrite ? OutputMode::Overwrite : OutputMode::Fresh, "--output", report_files());
  install_stop_handlers(false);
  if (!a.quiet)
    for (const auto& note : notes) std::cerr << "gpumembench: trace " << printable_text(a.trace) << ": " << note << "\n";
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
  // The self-check compares the device calls and OOMs of PyTorch's allocator, replayed with the
  // recorded settings on the simulated device, with the recording's. A run of `caching` on sim
  // is that replay: its own device calls are compared (RunSettings::device_calls). Otherwise
  // (another device, another allocator that takes the settings) the snapshot is replayed once
  // more on a simulated device of its own: on a second thread beside the run, started when the
  // run's device says its capacity and card, with the allocator's options as the run has them
  // (with --capacity, the memory limit it sets).
  // The export replays on a simulated device as the run's too (the same options as used).
  const bool self_check = snapshot && own_settings;
  const bool check_in_run = self_check && a.allocator == "caching" && resolve_device(spec.choice) == DeviceChoice::Sim;
  std::vector<DeviceCall> run_calls;
  if (check_in_run) settings.device_calls = &run_calls;
  std::future<SnapshotCheck> check;
  AllocatorOptions run_options = options;
  if (self_check && !check_in_run) settings.threads_beside = 1;
  settings.on_device_ready = [&](const DeviceInfo& d, const AllocatorOptions& used) {
    run_options = used;
    if (self_check && !check_in_run)
      check = std::async(std::launch::async, check_snapshot_replay, std::cref(*snapshot), std::cref(run_options),
                         d.capacity_bytes, d.total_bytes);
  };
  CaseSpec cs{a.allocator, options, make_workload};
  CaseResult result = run_case(cs, spec, settings);  // TraceError later in the file: exit 2, nothing written
  settings.on_device_ready = nullptr;
  if (!result.device) throw DeviceError(result.error);  // as making the device would have
  report.device = *result.device;
  report.cases.push_back(std::move(result));
  // A case that could not run to its end (a model limit, a device error) leaves no RMM log,
  // timeline or exported snapshot: each would be of part of the trace. Its results say why.
  const bool ran = report.cases[0].error.empty();
  if (!ran) rmm_log.reset();  // (the temporary file removed)
  if (rmm_log) {
    rmm_log->commit();
    // An RMM log has allocate and free rows only: a free request and an empty_cache are not in it.
    std::uint64_t requests = 0;
    if (snapshot)
      for (const Op& op : snapshot->ops) requests += op.kind == Op::Kind::FreeRequested;
    if (!a.quiet && snapshot && (requests || snapshot->empty_caches))
      std::cerr << fmt::format("gpumembench: note: an RMM log has no rows for the trace's {} free requests (frees that "
                               "waited on another stream) and {} empty_cache calls: its replay frees those blocks at "
                               "their return and keeps the cache, so its figures can differ from this run's "
                               "(--export-snapshot keeps both)\n",
                               requests, snapshot->empty_caches);
    if (!a.quiet)
      std::cerr << "gpumembench: wrote the replay as an RMM log: " << a.export_rmm_log << " (" << rmm_log->rows()
                << " rows)"
                << (placements.empty() ? ""
                                       : "; an RMM log holds no segment addresses: its replay puts segments where the "
                                         "simulated driver does, not where this one put them (the recording's), so "
                                         "figures that hang on ties between equal free blocks can differ "
                                         "(--export-snapshot keeps the addresses)")
                << "\n";
  }
  if (!a.timeline.empty() && ran) {
    SignalsHeld held;
    write_timeline_csv(a.timeline, report.cases[0].timeline);
  }
  std::cout << markdown_table(report);
  if (report.cases[0].recorded_ooms) std::cout << "\n" << recorded_vs_replayed(report.cases[0]) << "\n";
  if (!a.quiet)  // what the reader found on the way (the notes of the start were printed before)
    for (std::size_t i = meta.notes.size(); i < report.cases[0].workload_notes.size(); ++i)
      std::cerr << "gpumembench: trace " << printable_text(a.trace) << ": " << report.cases[0].workload_notes[i] << "\n";
  if (self_check) {
    const CaseResult& run = report.cases[0];
    // The run's own calls where it ran to its end and kept every OOM (a run with more OOMs than
    // it keeps is replayed once more).
    const bool from_run = check_in_run && ran && !run.runs.empty() && run.runs[0].ooms == run.oom_events.size();
    std::vector<std::uint64_t> oom_ops;
    if (from_run)
      for (const OomRecord& o : run.oom_events) oom_ops.push_back(o.event);
    const SnapshotCheck c =
        from_run      ? check_snapshot_run(*snapshot, run_calls, oom_ops,
                                       run.runs[0].allocs + run.runs[0].frees + run.runs[0].ooms +
                                           snapshot->empty_caches,
                                       report.device.capacity_bytes)
        : check.valid() ? check.get()
                        : check_snapshot_replay(*snapshot, run_options, report.device.capacity_bytes,
                                                report.device.total_bytes);
    std::cout << to_text(c) << (c.checked ? " (on the simulated device)" : "") << "\n";
  } else if (snapshot && takes_alloc_conf && !meta.has_alloc_conf && !a.alloc_conf_given) {
    std::cout << to_text(check_without_recorded_settings(*snapshot)) << "\n";
  }
  if (!a.export_snapshot.empty() && ran) {
    // The export replays on the simulated device, reading the trace again (a snapshot: from memory).
    std::unique_ptr<TraceSource> again = snapshot ? source->replay_from_start() : open_trace(a.trace, open_options);
    OpReader read = [&](std::vector<Op>& out, std::size_t max) { return again->read(out, max); };
    // A snapshot's origins by (trace entry, kind): the writer gets copies of its ops, and may ask
    // for ops older than the source's last two reads (all it can find again).
    std::unordered_map<std::uint64_t, std::string> origin_of_entry;
    if (snapshot)
      for (std::size_t i = 0; i < snapshot->ops.size(); ++i) {
        const Op op = snapshot->ops[i];
        if (snapshot->op_origin[i] && op.source_line)
          origin_of_entry[op.source_line * 2 + (op.kind == Op::Kind::Alloc)] = snapshot->origins[snapshot->op_origin[i]];
      }
    OpOrigin origin = [&](const Op& op) -> std::string {
      if (!snapshot) return again->origin(op);
      auto it = origin_of_entry.find(op.source_line * 2 + (op.kind == Op::Kind::Alloc));
      return it == origin_of_entry.end() ? std::string() : it->second;
    };
    try {
      SnapshotExportSummary sum = export_snapshot(a.export_snapshot, read, a.allocator, run_options,
                                                  report.device.capacity_bytes, origin, placements,
                                                  report.device.total_bytes, spec.ordinal);
      if (!a.quiet)
        std::cerr << fmt::format("gpumembench: the simulated run written as a PyTorch snapshot to {} ({} trace entries, "
                                 "{} OOMs, {} segments at the end)\n",
                                 a.export_snapshot, sum.entries, sum.ooms, sum.segments);
    } catch (const std::runtime_error& e) {
      if (dynamic_cast<const TraceError*>(&e) || dynamic_cast<const FileWriteError*>(&e)) throw;
      throw UsageError(fmt::format("--export-snapshot: {}", e.what()));
    }
  }
  if (!a.output.empty()) {
    SignalsHeld held;
    write_reports(report, a.output, formats);
  }
  if (!ran) {
    std::cerr << fmt::format("gpumembench: trace {}: the replay through {} could not run to its end: {}\n",
                             printable_text(a.trace), a.allocator, report.cases[0].error);
    std::vector<std::string> left;
    if (!a.export_rmm_log.empty()) left.push_back("--export-rmm-log");
    if (!a.timeline.empty()) left.push_back("--timeline");
    if (!a.export_snapshot.empty()) left.push_back("--export-snapshot");
    if (!left.empty())
      std::cerr << fmt::format("gpumembench: nothing written for {} (it would hold part of the trace)\n",
                               fmt::join(left, ", "));
    return 1;
  }
  return 0;
}

// Several results side by side. Without --output the chosen formats (default md) go to
// stdout; with it, files go there and the Markdown table to stdout.
int run_compare(const std::vector<std::string>& inputs, const std::string& output_flag,
                const std::string& format_flag, const std::string& match_flag, bool overwrite) {
  if (overwrite && output_flag.empty()) throw UsageError("--overwrite applies to --output DIR");
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
  // Taken as a run takes its folder: refused when in use or holding other files (--overwrite
  // replaces the compare files), locked while written.
  OutputFolder folder(output_flag, overwrite ? OutputMode::Overwrite : OutputMode::Fresh, "--output", compare_files());
  std::cout << compare_markdown(c);
  write_compare(c, folder.path(), formats);
  return 0;
}

// Every subcommand in one place: the no-argument message and `gpumembench help` list them all.
const char* kSynopsis =
    "  gpumembench --config FILE [--device auto|sim|cuda] [--capacity SIZE] [--steps N] [--allocator NAME]...\n"
    "              [--baseline NAME] [--metrics LIST] [--output DIR [--overwrite] | --resume DIR]\n"
    "              [--format md,csv,json,latex] [--quiet] [--shard I/N] [--jobs N | --gpus all|0,1,...]\n"
    "                                                    run a config's workloads x allocators\n"
    "  gpumembench merge DIR... --output DIR [--config FILE --device sim|cuda] [--allow-mixed]\n"
    "                                                    join run folders (shards, nodes) into one run's tables\n"
    "  gpumembench plan --config FILE [--device ...] [--capacity SIZE] [--steps N] [--allocator NAME]...\n"
    "                                                    the run's cases with their ids, as JSON lines\n"
    "  gpumembench replay --trace FILE --allocator NAME [--alloc-conf STR] [--capacity SIZE] [--device ...]\n"
    "              [--timeline FILE] [--output DIR] [--format ...]           one allocation trace, one allocator\n"
    "  gpumembench frontier --config FILE [--param capacity|batch|seq_len] [--lo V] [--hi V] [--resolution V]\n"
    "              [--steps N] [--allocator NAME]... [--device ...] [--capacity SIZE] [--output DIR]\n"
    "                                                    smallest capacity (largest batch/seq_len) without an OOM\n"
    "  gpumembench reduce --trace FILE|--config FILE --allocator NAME [--alloc-conf STR] [--capacity SIZE]\n"
    "              [--contrast-alloc-conf STR] [--output DIR]   shrink the first OOM to a small reproducer\n"
    "  gpumembench compare RESULTS RESULTS... [--match label|allocator] [--output DIR] [--format ...]\n"
    "                                                    runs side by side\n"
    "  gpumembench configs                                      the shipped configs, for --config NAME\n"
    "  gpumembench plot RESULTS_DIR [--out DIR] [--formats png,pdf,svg]   plots of a run (python3, matplotlib)\n"
    "  gpumembench help [replay|frontier|compare|reduce|plan|merge]  this help, or a subcommand's\n"
    "  gpumembench --version                                    version, commit, CUDA path, PyTorch release\n";

const char* kRunExamples =
    "\nExamples:\n"
    "  gpumembench --config hole_pattern.yaml                         # cuda if a GPU is visible, else sim\n"
    "  gpumembench --config dynamic_seq --device sim --steps 50 --allocator caching\n"
    "  gpumembench --config fragmentation_oom --format md,latex --output out/frag\n"
    "  gpumembench --config my_job.yaml                               # a config file of your own\n"
    "  gpumembench --config dynamic_seq --resume results/dynamic_seq-20260101T120000Z   # after Ctrl-C\n"
    "  gpumembench --config sweep.yaml --device sim --jobs 4      # 4 worker processes, one case each at a time\n"
    "  gpumembench --config sweep.yaml --device cuda --gpus all   # one case per GPU at a time\n"
    "\nSubcommands: replay, frontier, reduce, compare, plan, merge, configs, plot, help (gpumembench help SUBCOMMAND).\n"
    "Each case's result is written to DIR/cases/<id>.json when it ends; Ctrl-C (or SIGTERM) stops after the\n"
    "case that is running (a second one at once) and says how to resume.\n"
    "Exit status: 0 every case ran (an OOM is a result, in the tables); 2 bad usage, config or trace\n"
    "(nothing runs, nothing is written); 1 a case could not run, or an internal error.\n";

}  // namespace

// An option given an empty value ("--capacity ''", "--output=") is a usage error, not the
// option left out: the command would otherwise run with its default and say nothing. Only the
// alloc_conf strings take "" (PyTorch's defaults).
static void reject_empty_values(const CLI::App& app) {
  for (const CLI::Option* o : app.get_options()) {
    if (o->count() == 0 || o->get_expected_max() == 0) continue;  // not given, or a flag
    const std::string name = o->get_name(false, true);
    if (name == "--alloc-conf" || name == "--contrast-alloc-conf") continue;
    for (const std::string& v : o->results())
      if (v.empty()) throw UsageError(fmt::format("{}: an empty value (give one, or leave the option out)", name));
  }
  for (const CLI::App* sub : app.get_subcommands()) reject_empty_values(*sub);
}

int run_cli(int argc, char** argv) {
  CLI::App app{"gpumembench: how GPU memory allocators use memory, where they run out (fragmentation or "
               "capacity) and how fast they are: workloads x allocators, on a real or a simulated GPU",
               "gpumembench"};
  std::string version = version_text();
  if (!version.empty() && version.back() == '\n') version.pop_back();  // CLI11 ends the line
  app.set_version_flag("--version", version);
  app.footer(kRunExamples);
  std::string config, device, output, format, capacity;
  bool quiet = false;
  app.add_option("--config", config,
                 "YAML config: a file, or a shipped config's name with or without .yaml (gpumembench configs "
                 "lists them); its workloads x allocators are the cases")
      ->transform(shipped_config_lookup());
  app.add_option("--device", device,
                 "auto (default): cuda if a GPU is visible, else sim; sim: a simulated GPU of the config's capacity "
                 "(throughput and native allocators' memory modeled); cuda: the real GPU")
      ->check(CLI::IsMember({"auto", "sim", "cuda"}));
  app.add_option("--output", output,
                 "output folder (default results/<config name>-<UTC time>/, made unique); an existing folder that "
                 "is not empty is refused unless --overwrite");
  std::string resume;
  bool overwrite = false;
  app.add_option("--resume", resume,
                 "continue the run whose folder this is (same config and flags): the cases done there are kept, "
                 "the others run, the tables cover all")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--overwrite", overwrite,
               "use --output even if it holds an earlier run: its results.*, cases/, oom/, timelines/ and plots/ "
               "are removed first (nothing else)");
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
  std::string baseline;
  app.add_option("--baseline", baseline,
                 "show every allocator relative to this one in the tables (peak reserved as a ratio, steps/s as a "
                 "change): a row label or an allocator's name; default: the config's output.baseline");
  std::string metrics;
  app.add_option("--metrics", metrics,
                 "fragmentation metrics the tables show beside gpumembench's own, comma-separated: gmlake, stalloc, "
                 "tf, memory_viz, or all (docs/METRICS.md); results.csv and results.json hold them all; default: "
                 "the config's output.metrics");
  std::uint64_t steps = 0;
  const CLI::Validator step_count = step_count_flag();
  app.add_option("--steps", steps, "run at most N steps of each workload (a shorter run of the same config)")
      ->check(step_count);
  std::string shard, gpus, worker_case, worker_command;
  std::uint64_t jobs = 0;
  bool in_process = false;
  app.add_option("--shard", shard,
                 "run only shard I of N of the cases (those whose plan index is I mod N), counted from 0: 0/3, 1/3, "
                 "2/3; default: from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, SLURM_PROCID/SLURM_NTASKS or "
                 "JOB_COMPLETION_INDEX/GPUMEMBENCH_SHARD_COUNT when set, else every case; gpumembench merge joins "
                 "the shards' folders");
  app.add_option("--jobs", jobs,
                 "sim: run the cases in N worker processes at once, each case in a process of its own")
      ->check(CLI::Range(std::uint64_t(1), std::uint64_t(1024)));
  app.add_option("--gpus", gpus,
                 "cuda: all, or GPU numbers such as 0,1: one worker per GPU (pinned with CUDA_VISIBLE_DEVICES), "
                 "each case in a process of its own and alone on its GPU, cases from one queue");
  app.add_flag("--in-process", in_process,
               "cuda: run the cases in this process, one after another (default: each GPU case in a process of its "
               "own, so a sticky CUDA error or a crash ends that case alone)");
  app.add_option("--worker-case", worker_case, "internal: a sweep's worker running one case")->group("");
  app.add_option("--worker-command", worker_command, "internal: the sweep's command line")->group("");

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
      ->check(device_number_flag());
  replay->add_option("--timeline", ra.timeline, "write allocated/reserved bytes after every event to this CSV");
  replay->add_option("--export-snapshot", ra.export_snapshot,
                     "write the simulated run as a PyTorch memory snapshot (opens in PyTorch's memory_viz)");
  replay->add_option("--export-rmm-log", ra.export_rmm_log,
                     "write the replayed run as an RMM memory event log (Thread,Time,Action,Pointer,Size,Stream)");
  replay->add_option("--output", ra.output,
                     "also write results files (and oom/ block maps) into this folder (refused when it holds files, "
                     "unless --overwrite)");
  replay->add_flag("--overwrite", ra.overwrite, "use --output even if it holds an earlier run's files (they are removed)");
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
  bool compare_overwrite = false;
  compare->add_flag("--overwrite", compare_overwrite, "replace the compare files of an earlier comparison in --output DIR");
  compare->add_option("--match", compare_match,
                      "pair cases by 'label' (the same case on two devices or versions) or by 'allocator' "
                      "setting (the same allocators on two workloads, e.g. dynamic vs fixed lengths); default: "
                      "allocator when the inputs' workloads differ, else label")
      ->check(CLI::IsMember(compare_match_names()));

  auto* plan = app.add_subcommand(
      "plan", "print the cases a run of this config would run, one JSON line each with its id; runs nothing");
  plan->footer(
      "\nEach line: {\"index\", \"id\", \"label\", \"spec\"}. The id is a hash of the spec (the allocator and its "
      "options, the workload's parameters and the content of its input files, the device kind and capacity, the run "
      "settings, the tool version): a run writes the case's result to DIR/cases/<id>.json, which --resume finds.\n"
      "Example:\n  gpumembench plan --config configs/hole_pattern.yaml --device sim\n");
  RunArgs plan_args;
  plan->add_option("--config", plan_args.config, "YAML config, a file or a shipped config's name")->required()->transform(shipped_config_lookup());
  plan->add_option("--device", plan_args.device, "auto (default), sim or cuda: the device kind is part of the ids")
      ->check(CLI::IsMember({"auto", "sim", "cuda"}));
  plan->add_option("--capacity", plan_args.capacity, "as for a run");
  plan->add_option("--steps", plan_args.steps, "as for a run")->check(step_count);
  plan->add_option("--allocator", plan_args.allocators, "as for a run")->allow_extra_args(false);
  plan->add_option("--shard", plan_args.shard, "only the cases of shard I/N (as a run with --shard runs them)");

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
  MergeCliArgs merge_args;
  auto* merge = add_merge_command(app, merge_args);

  // `gpumembench help [SUBCOMMAND]` is answered before parsing: CLI11 would take "help replay"
  // for the replay subcommand itself. It is registered so that --help lists it.
  auto* help = app.add_subcommand("help", "this help, or a subcommand's: gpumembench help frontier");
  auto* configs = app.add_subcommand("configs", "list the shipped configs (run one with --config NAME), each with its first comment line");
  auto* plot = app.add_subcommand(
      "plot", "plots of a results folder as PNG and PDF: gpumembench plot RESULTS_DIR [--out DIR] "
              "[--formats png,pdf,svg] (runs the installed plot.py; needs python3 and matplotlib)");
  plot->prefix_command();  // every argument goes to plot.py as given
  help->allow_extras();
  if (argc >= 2 && std::string(argv[1]) == "help") {
    const std::string topic = argc >= 3 ? argv[2] : "";
    if (!topic.empty() && topic != "replay" && topic != "frontier" && topic != "compare" && topic != "reduce" &&
        topic != "plan" && topic != "merge") {
      std::cerr << "gpumembench help: '" << topic
                << "' is not a subcommand (valid: replay, frontier, compare, reduce, plan, merge)\n";
      return 2;
    }
    std::cout << (topic.empty() ? app.help() : app.get_subcommand(topic)->help());
    if (topic.empty()) std::cout << "\nUsage:\n" << kSynopsis;
    return 0;
  }

  if (argc <= 1) {
    std::cerr << "gpumembench: nothing to run. Usage:\n" << kSynopsis
              << "Try: gpumembench --config hole_pattern.yaml --device sim (gpumembench configs lists the shipped configs)\n"
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
    reject_empty_values(app);
    // The devices' diagnostic variables: a bad value is a usage error before anything runs.
    try {
      pool_call_delay_seconds_from_environment();
    } catch (const DeviceError& e) {
      throw UsageError(e.what());
    }
    if (help->parsed()) {  // after other flags: gpumembench --quiet help
      std::cout << app.help() << "\nUsage:\n" << kSynopsis;
      return 0;
    }
    if (compare->parsed()) return run_compare(compare_inputs, output, format, compare_match, compare_overwrite);
    if (plan->parsed()) return run_plan(plan_args);
    if (merge->parsed()) return run_merge_command(merge_args, cmd);
    if (configs->parsed()) return list_shipped_configs(std::cout, std::cerr);
    if (plot->parsed()) return run_plot_command(plot->remaining(), std::cerr);
    if (frontier->parsed()) return run_frontier_command(frontier_args, cmd);
    if (reduce->parsed()) return run_reduce_command(reduce_args, cmd);
    if (replay->parsed()) {
      ra.alloc_conf_given = conf_opt->count() > 0;
      return run_replay(ra, cmd);
    }
    if (config.empty() && !resume.empty()) {
      std::cerr << "gpumembench: --resume " << resume << " continues a run: give its --config FILE and flags again\n";
      return 2;
    }
    if (config.empty()) {
      std::cerr << "gpumembench: --config FILE is required to run a config. Usage:\n" << kSynopsis;
      return 2;
    }
    RunArgs run_args{config, device, capacity, output, resume,  format,     baseline,    overwrite,
                     quiet,  steps,  only_allocators, shard, jobs, gpus, in_process, worker_case, worker_command, metrics};
    return run_config(run_args, cmd, argc, argv);
  } catch (const ConfigError& e) {
    // Every message through printable_message: messages quote the user's input, and whichever one
    // forgot to escape it (yaml-cpp's own among them), what a terminal acts on never reaches it.
    std::cerr << "gpumembench: " << printable_message(e.what()) << "\n";
    return 2;
  } catch (const TraceError& e) {
    std::cerr << "gpumembench: " << printable_message(e.what()) << "\n";
    return 2;
  } catch (const UsageError& e) {
    std::cerr << "gpumembench: " << printable_message(e.what()) << "\n";
    return 2;
  } catch (const CompareError& e) {
    std::cerr << "gpumembench compare: " << printable_message(e.what()) << "\n";
    return 2;
  } catch (const OutputFolderError& e) {
    std::cerr << "gpumembench: " << printable_message(e.what()) << "\n";
    return 2;
  } catch (const FileWriteError& e) {  // a full disk: the file is named, nothing half-written is left
    std::cerr << "gpumembench: " << printable_message(e.what()) << "\n";
    return 1;
  } catch (const std::bad_alloc&) {  // the host's memory, not a fault of ours: said as such
    std::cerr << "gpumembench: out of host memory (the machine's, or the process's limit: ulimit -v); nothing more "
                 "was written\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gpumembench: internal error: " << printable_message(e.what()) << "\n";
    return 1;
  }
}

}  // namespace gmb
