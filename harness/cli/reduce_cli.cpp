#include "harness/cli/reduce_cli.h"

#include <algorithm>
#include <unistd.h>

#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "allocators/registry.h"
#include "common/text_excerpt.h"
#include "common/units.h"
#include "harness/cli/config_option.h"
#include "harness/cli/count_flag.h"
#include "harness/cli/size_flag.h"
#include "harness/config/config.h"
#include "harness/reduce/reduce.h"
#include "harness/reduce/reproducer_files.h"
#include "harness/report/report.h"
#include "harness/run/snapshot_check.h"
#include "workloads/trace.h"

namespace gmb {

namespace {

struct Input {
  std::vector<Op> ops;  // Alloc and Free only
  std::string source;   // for the summary
  std::string recorded_alloc_conf;
  std::string recorded_alloc_conf_error;  // TraceMeta::alloc_conf_error
  std::string stale_alloc_conf_note;      // recorded_alloc_conf's note: said where the settings are used
  bool has_recorded_alloc_conf = false;
  std::uint64_t recorded_ooms = 0;  // the recording's own failed allocations (a snapshot's oom, RMM's allocate failure)
  Bytes capacity = 0;   // a config's capacity, or a trace's default one (0: none)
  std::string capacity_note;  // where a trace's default capacity comes from (said unless --capacity is given)
  std::vector<std::string> notes;
};

// The reducer keeps a buffer until its free and makes no empty_cache: free requests and the
// program's empty_cache calls are left out of its input and of the input case alike (an allocator
// that waits for streams, as caching does at a retry, may then run out of memory where the replay
// of the trace would not; without the empty_cache calls the cache holds more), with a note.
void leave_out_what_reduce_does_not_replay(Input& in) {
  const auto leave_out = [&](Op::Kind kind, const char* why) {
    const auto is = [kind](const Op& op) { return op.kind == kind; };
    const auto n = std::count_if(in.ops.begin(), in.ops.end(), is);
    if (!n) return;
    in.ops.erase(std::remove_if(in.ops.begin(), in.ops.end(), is), in.ops.end());
    in.notes.push_back(fmt::format("{} {}", n, why));
  };
  leave_out(Op::Kind::FreeRequested,
            "free requests (frees that waited on another stream) left out: reduce keeps each buffer until its free, "
            "so an OOM that waiting for the stream avoids in `replay` can be reduced here, and its events are "
            "numbered without them");
  leave_out(Op::Kind::EmptyCache,
            "empty_cache calls of the program left out: reduce replays allocations and frees only, so the cache "
            "holds what they released, and events are numbered without them");
}

Input read_input(const ReduceCliArgs& a) {
  Input in;
  if (!a.trace.empty()) {
    TraceOpenOptions o;
    o.device = a.trace_device;
    auto source = open_trace(a.trace, o);
    while (source->read(in.ops, std::size_t(1) << 16) > 0) {
    }
    in.source = a.trace;
    in.has_recorded_alloc_conf = source->meta().has_alloc_conf;
    in.recorded_alloc_conf = recorded_alloc_conf(source->meta(), &in.stale_alloc_conf_note);
    in.recorded_alloc_conf_error = source->meta().alloc_conf_error;
    in.notes = describe(source->meta());
    in.recorded_ooms = source->meta().recorded_ooms;
    // As `replay` on sim: the recording device's memory where the trace says it, else the
    // simulated device's default.
    in.capacity = source->meta().device_capacity ? source->meta().device_capacity : kH200CardBytes;
    in.capacity_note = source->meta().device_capacity
                           ? fmt::format("capacity: {}, the recording device's (--capacity replaces it)",
                                         format_bytes(in.capacity))
                           : fmt::format("capacity: {}, the simulated device's default (an H200's whole memory; "
                                         "--capacity replaces it)",
                                         format_bytes(in.capacity));
    leave_out_what_reduce_does_not_replay(in);
    return in;
  }
  Config config = load_config(a.config);  // ConfigError: left to the caller (exit 2)
  if (a.workload >= config.workloads.size())
    throw std::invalid_argument(fmt::format("--workload: {} has {} workload(s) (valid: 0 to {})", a.config,
                                            config.workloads.size(), config.workloads.size() - 1));
  auto workload = config.workloads[a.workload].make();
  const std::uint64_t steps = a.steps ? std::min(a.steps, workload->num_steps()) : workload->num_steps();
  std::vector<Op> step;
  for (std::uint64_t s = 0; s < steps; ++s) {
    step.clear();
    StepInfo info;
    whole_step_ops(*workload, s, step, info);
    if (info.end) break;
    for (const Op& op : step)
      if (op.kind != Op::Kind::Compute) in.ops.push_back(op);  // (empty_cache calls: left out below)
  }
  workload->finish();
  in.source = fmt::format("{} (workload {}: {}{})", a.config, a.workload, workload->label(),
                          a.steps ? fmt::format(", {} steps", steps) : "");
  in.capacity = config.device.capacity_bytes;
  leave_out_what_reduce_does_not_replay(in);
  return in;
}

CaseResult replay_case(const std::string& name, const std::vector<Op>& ops, const std::string& allocator,
                       const AllocatorOptions& options, Bytes capacity, bool block_map) {
  CaseSpec cs{allocator, options, [&] { return make_trace_workload(Trace{name, ops}); }};
  DeviceSpec spec;
  spec.choice = DeviceChoice::Sim;
  spec.capacity_bytes = capacity;
  RunSettings settings;
  settings.on_oom = OnOom::Stop;
  settings.oom_block_map = block_map;
  return run_case(cs, spec, settings);
}

}  // namespace

CLI::App* add_reduce_command(CLI::App& app, ReduceCliArgs& a) {
  auto* r = app.add_subcommand(
      "reduce", "shrink a trace's first OOM to a small reproducer (trace, block map, summary, PyTorch script)");
  r->footer(
      "\nExamples:\n"
      "  gpumembench reduce --trace configs/traces/fragmentation_oom/fragmentation_oom.csv --allocator caching "
      "--capacity 1792MiB --output repro/\n"
      "  gpumembench reduce --config configs/dynamic_seq.yaml --steps 224 --allocator caching --capacity 24GiB "
      "--contrast-alloc-conf expandable_segments:True --output repro/\n"
      "Replays the input to its first OOM, drops what follows, removes allocations together with their frees "
      "(delta debugging) while the OOM stays at the request with the same kind (and, with --contrast-alloc-conf, "
      "does not happen under those settings), rounds sizes, renumbers ids. Writes reduced_trace.csv, "
      "oom_block_map.svg, summary.md and repro_torch.py (caching) into --output.\n");
  auto* input = r->add_option_group("input", "the trace or the config to reduce");
  input->add_option("--trace", a.trace, "the trace: native CSV, RMM log or PyTorch snapshot, plain or gzip")
      ->check(CLI::ExistingFile);
  input->add_option("--config", a.config,
                    "a config, a file or a shipped config's name: the event stream of one of its workloads (--workload)")
      ->transform(shipped_config_lookup());
  input->require_option(1);
  r->add_option("--workload", a.workload, "with --config: which workload (0-based; default 0)")
      ->check(whole_number_flag());
  r->add_option("--steps", a.steps, "with --config: at most N steps of the workload")->check(step_count_flag());
  r->add_option("--trace-device", a.trace_device, "PyTorch snapshot: the device whose trace to read")
      ->check(device_number_flag());
  r->add_option("--allocator", a.allocator, "allocator name: " + allocator_names())->required();
  auto* conf = r->add_option("--alloc-conf", a.alloc_conf,
                             "caching: PyTorch's PYTORCH_CUDA_ALLOC_CONF string (default: a snapshot's own)");
  auto* contrast = r->add_option(
      "--contrast-alloc-conf", a.contrast_alloc_conf,
      "caching: settings under which the reduced trace must run WITHOUT an OOM (the 'OOMs under A but not "
      "under B' reproducer), e.g. expandable_segments:True");
  r->add_option("--capacity", a.capacity,
                "the device's memory, e.g. 24GiB (default: the config's; for a trace an H200's whole memory, as replay "
                "on sim: neither a snapshot nor a log records the device's size)");
  r->add_option("--memory-limit", a.memory_limit,
                "caching: the allocator's limit below the capacity, as set_per_process_memory_fraction sets it");
  r->add_option("--output", a.output, "output folder (default reduce-<UTC time>/); one that holds files is refused unless --overwrite");
  r->add_flag("--overwrite", a.overwrite,
              "write into --output DIR although it holds files: reduce's own (reduced_trace.csv, oom_block_map.svg, "
              "summary.md, repro_torch.py) are replaced, the others left");
  r->add_option("--max-seconds", a.max_seconds, "stop reducing after this long and keep the best so far (default 120; 0: no limit)")
      ->check(seconds_flag());
  r->add_option("--max-replays", a.max_replays, "stop after this many replays (default: no limit; deterministic)")
      ->check(whole_number_flag());
  r->add_flag("--no-coarsen", a.no_coarsen, "keep the sizes as they are");
  r->add_flag("--quiet,-q", a.quiet, "no progress line or notices on stderr");
  r->callback([&a, conf, contrast] {
    a.alloc_conf_given = conf->count() > 0;
    a.contrast_given = contrast->count() > 0;
  });
  return r;
}

int run_reduce_command(ReduceCliArgs& a, const std::string& cmd) {
  try {
    if (!find_allocator(a.allocator))
      throw std::invalid_argument(fmt::format("--allocator: unknown allocator '{}' (valid: {})", a.allocator, allocator_names()));
    const AllocatorTraits traits = allocator_traits(a.allocator);
    if ((a.alloc_conf_given || a.contrast_given || !a.memory_limit.empty()) && !traits.accepts_alloc_conf)
      throw std::invalid_argument(fmt::format("--alloc-conf, --contrast-alloc-conf and --memory-limit apply to the {} allocator, not '{}'",
                                              allocator_names_where(&AllocatorTraits::accepts_alloc_conf), a.allocator));
    if (!a.trace.empty() && (a.workload || a.steps))
      throw std::invalid_argument("--workload and --steps apply to --config, not --trace");
    if (a.overwrite && a.output.empty()) throw std::invalid_argument("--overwrite applies to --output DIR");
    check_reproducer_folder(a.output, a.overwrite);  // before the search, which may take minutes
    Input in = read_input(a);
    ReduceSettings settings;
    settings.target.allocator = a.allocator;
    AllocatorOptions& options = settings.target.options;
    if (a.alloc_conf_given) {
      if (!a.alloc_conf.empty()) options["alloc_conf"] = a.alloc_conf;
    } else if (in.has_recorded_alloc_conf && traits.accepts_alloc_conf && !in.recorded_alloc_conf_error.empty()) {
      throw TraceError(in.source, 0, in.recorded_alloc_conf_error + "; --alloc-conf replaces the recorded allocator settings");
    } else if (in.has_recorded_alloc_conf && traits.accepts_alloc_conf && !in.recorded_alloc_conf.empty()) {
      options["alloc_conf"] = in.recorded_alloc_conf;
      if (!in.stale_alloc_conf_note.empty()) in.notes.push_back(in.stale_alloc_conf_note);
      in.notes.push_back(fmt::format("allocator settings: the recorded \"{}\" (--alloc-conf replaces them)",
                                     in.recorded_alloc_conf));
    }
    Bytes limit = 0;
    if (!a.memory_limit.empty()) {
      limit = parse_size_flag("--memory-limit", a.memory_limit);
      options["memory_limit_bytes"] = std::to_string(limit);
    }
    settings.target.capacity_bytes = !a.capacity.empty() ? parse_size_flag("--capacity", a.capacity) : in.capacity;
    if (!settings.target.capacity_bytes)
      throw std::invalid_argument("--capacity is required: the config gives none (the device's memory, e.g. 24GiB)");
    if (a.capacity.empty() && !in.capacity_note.empty()) in.notes.push_back(in.capacity_note);
    if (limit > settings.target.capacity_bytes)
      throw std::invalid_argument(fmt::format("--memory-limit: {} is more than the device's {} (valid: up to the "
                                              "device's memory; a memory fraction is at most 1)",
                                              format_bytes(limit), format_bytes(settings.target.capacity_bytes)));
    if (a.contrast_given) {
      AllocatorOptions c = options;
      c.erase("alloc_conf");
      if (!a.contrast_alloc_conf.empty()) c["alloc_conf"] = a.contrast_alloc_conf;
      settings.contrast = c;
    }
    for (const AllocatorOptions* o : {&options, settings.contrast ? &*settings.contrast : nullptr}) {
      if (!o) continue;
      try {
        validate_allocator_options(a.allocator, *o);
      } catch (const OptionError& e) {
        if (o == &options && !a.alloc_conf_given && options.count("alloc_conf"))  // the recording's, not a flag's
          throw TraceError(in.source, 0,
                           fmt::format("the recorded allocator settings \"{}\": {} (valid: {}); --alloc-conf replaces them",
                                       printable_text(options.at("alloc_conf")), e.what(), e.valid));
        throw std::invalid_argument(fmt::format("{}: {} (valid: {})", o == &options ? "--alloc-conf" : "--contrast-alloc-conf",
                                                e.what(), e.valid));
      }
    }
    settings.max_seconds = a.max_seconds;
    settings.max_replays = a.max_replays;
    settings.coarsen = !a.no_coarsen;
    const bool show = !a.quiet && isatty(STDERR_FILENO);
    auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    if (show)
      settings.progress = [&](const ReduceProgress& p) {
        const auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::milliseconds(200)) return;
        last = now;
        fmt::print(stderr, "\r\033[Kreduce: {} | {} -> {} events | {} replays | {:.1f}s", p.phase,
                   with_commas(p.input_events), with_commas(p.events), with_commas(p.replays), p.seconds);
        std::fflush(stderr);
      };
    if (!a.quiet)
      for (const auto& n : in.notes) std::cerr << "gpumembench: " << in.source << ": " << n << "\n";
    if (!a.quiet)
      std::cerr << "gpumembench: reducing the first OOM of " << with_commas(in.ops.size())
                << " events on the simulated device\n";
    ReduceResult result;
    try {
      result = reduce_oom(in.ops, settings);
    } catch (const ReduceError& e) {
      if (show) fmt::print(stderr, "\r\033[K");
      std::cerr << "gpumembench reduce: " << printable_text(in.source) << ": " << e.what();
      // The recording failed where this replay does not: it ran on a smaller card or under a
      // memory fraction, which the trace does not record.
      if (dynamic_cast<const NoOomError*>(&e) && in.recorded_ooms && a.capacity.empty() && a.memory_limit.empty())
        std::cerr << fmt::format("; the recorded run had {} failed allocation(s): give the card it ran on (--capacity){}",
                                 in.recorded_ooms,
                                 traits.accepts_alloc_conf ? " or its memory fraction's limit (--memory-limit)" : "");
      std::cerr << "\n";
      return 2;
    }
    if (show) fmt::print(stderr, "\r\033[K");

    // The result checked through the runner, the path every replay takes.
    ReproducerInputs out;
    out.source = in.source;
    out.command_line = cmd;
    out.settings = settings;
    out.settings.progress = nullptr;
    out.memory_limit_bytes = limit;
    out.input_case = replay_case(in.source, in.ops, a.allocator, options, settings.target.capacity_bytes, false);
    const OomRecord* before = first_oom(out.input_case);
    if (!before || before->event != result.oom_event) {
      std::cerr << fmt::format("gpumembench reduce: internal error: the runner finds the first OOM at event {}, the "
                               "reducer at event {}\n",
                               before ? std::to_string(before->event) : "none", result.oom_event);
      return 1;
    }
    out.reduced_case = replay_case("reduced_trace.csv", result.ops, a.allocator, options, settings.target.capacity_bytes, true);
    const OomRecord* after = first_oom(out.reduced_case);
    if (!after || after->event + 1 != result.ops.size() || after->kind != result.kind) {
      std::cerr << fmt::format("gpumembench reduce: internal error: the runner replays the reduced trace ({} events) "
                               "to {}, not to a {} OOM at its last event\n",
                               result.ops.size(),
                               after ? fmt::format("a {} OOM at event {}", to_string(after->kind), after->event)
                                     : std::string("no OOM"),
                               to_string(result.kind));
      return 1;
    }
    if (settings.contrast) {
      out.reduced_contrast_case =
          replay_case("reduced_trace.csv", result.ops, a.allocator, *settings.contrast, settings.target.capacity_bytes, false);
      if (first_oom(*out.reduced_contrast_case)) {
        std::cerr << "gpumembench reduce: internal error: the reduced trace OOMs under the contrast settings\n";
        return 1;
      }
    }
    {
      SimDeviceOptions so;
      so.capacity_bytes = settings.target.capacity_bytes;
      out.device = sim_device_info(so);
    }
    out.result = std::move(result);
    const std::string dir = a.output.empty() ? "reduce-" + utc_now("%Y%m%dT%H%M%SZ") : a.output;
    std::string written;  // the folder, as write_reproducer names it
    try {
      written = write_reproducer(dir, out);
    } catch (const std::exception& e) {
      std::cerr << "gpumembench reduce: " << e.what() << "\n";
      return 2;
    }
    const ReduceResult& r = out.result;
    std::cout << fmt::format(
        "{} OOM at event {} ({} request){} reduced from {} events ({} up to the OOM) to {}; {} replays, {:.1f} s{}\n"
        "written to {}/: reduced_trace.csv, oom_block_map.svg, summary.md{}\n",
        to_string(r.kind), with_commas(r.oom_event), format_bytes(r.request_bytes),
        before->kind != r.kind ? fmt::format(" (the run's tables call it a {} OOM: the events after it need more)",
                                             to_string(before->kind))
                               : std::string(),
        with_commas(r.input_events),
        with_commas(r.oom_event + 1), with_commas(r.ops.size()), with_commas(r.replays), r.seconds,
        r.stopped_by.empty() ? "" : " (stopped by the " + r.stopped_by + "; may not be minimal)",
        written,
        traits.replayable_in_pytorch ? ", repro_torch.py" : "");
    return 0;
  } catch (const std::invalid_argument& e) {
    std::cerr << "gpumembench reduce: " << printable_message(e.what()) << "\n";
    return 2;
  }
}

}  // namespace gmb
