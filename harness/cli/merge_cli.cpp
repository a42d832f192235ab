#include "harness/cli/merge_cli.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/cli/metrics_flag.h"
#include "harness/cli/config_option.h"
#include "harness/cli/count_flag.h"
#include "harness/io/output_folder.h"
#include "harness/report/markdown_report.h"
#include "harness/report/report.h"
#include "harness/run/case_file.h"
#include "harness/run/stop_request.h"
#include "harness/sweep/merge.h"

namespace gmb {

CLI::App* add_merge_command(CLI::App& app, MergeCliArgs& a) {
  auto* merge = app.add_subcommand(
      "merge", "join the case files of several run folders (the shards of a sweep, other nodes) into the tables a run of "
               "the whole sweep writes");
  merge->footer(
      "\nExamples:\n"
      "  gpumembench merge out/shard-0 out/shard-1 out/shard-2 --output out/all\n"
      "  gpumembench merge out/shard-* --output out/all --config sweep.yaml --device cuda   # and list missing cases\n"
      "Cases are ordered as the run orders them; the same case found twice must have the same memory figures (the "
      "first is kept). Case files of different tool versions or devices are refused unless --allow-mixed.\n");
  merge->add_option("dirs", a.dirs, "run folders, each with a cases/ folder")->required()->check(CLI::ExistingDirectory);
  merge->add_option("--output", a.output, "the merged folder: results.*, oom/, timelines/ and the case files")->required();
  merge->add_flag("--overwrite", a.overwrite, "use --output even if it holds an earlier run's files (they are removed)");
  merge->add_option("--format", a.format, "md, csv, json, latex (default: the formats the runs wrote)");
  merge->add_option("--baseline", a.baseline, "as for a run (default: the runs' own)");
  merge->add_option("--metrics", a.metrics, "as for a run (default: the runs' own when they agree)");
  merge->add_flag("--allow-mixed", a.allow_mixed, "join cases of different tool versions or devices in one table");
  merge->add_flag("--quiet,-q", a.quiet, "no notices on stderr");
  merge->add_option("--config", a.plan.config, "the sweep's config: its cases in its order, the missing ones listed")
      ->transform(shipped_config_lookup());
  merge->add_option("--device", a.plan.device, "with --config: the device kind of the run (sim or cuda)")
      ->check(CLI::IsMember({"auto", "sim", "cuda"}));
  merge->add_option("--capacity", a.plan.capacity, "with --config: as for the run");
  merge->add_option("--steps", a.plan.steps, "with --config: as for the run")->check(step_count_flag());
  merge->add_option("--allocator", a.plan.allocators, "with --config: as for the run")->allow_extra_args(false);
  return merge;
}

int run_merge_command(const MergeCliArgs& a, const std::string& command_line) {
  std::optional<PlannedRun> plan;
  if (!a.plan.config.empty()) {
    RunArgs planning = a.plan;
    if (planning.device.empty() || planning.device == "auto")
      throw UsageError("merge --config: give --device sim or --device cuda (the device kind is part of every case's id)");
    plan = plan_run(planning, true);
  } else if (!a.plan.device.empty() || !a.plan.capacity.empty() || a.plan.steps || !a.plan.allocators.empty()) {
    throw UsageError("merge: --device, --capacity, --steps and --allocator go with --config");
  }
  MergeResult merged;
  try {
    merged = merge_case_folders(a.dirs, plan ? &plan->cases : nullptr, a.allow_mixed);
  } catch (const MergeError& e) {
    throw UsageError(fmt::format("merge: {}", e.what()));
  }
  std::vector<std::string> formats = merged.formats.empty() ? std::vector<std::string>{"md", "csv", "json"} : merged.formats;
  if (!a.format.empty()) formats = parse_formats(a.format);
  RunReport& report = merged.report;
  if (!a.baseline.empty()) {
    // As a run checks it: a row label of the merged cases, or an allocator's name where the
    // cases hold one setting of it.
    std::vector<AllocatorSetting> settings;  // each setting once
    for (const CaseResult& c : report.cases)
      if (std::none_of(settings.begin(), settings.end(),
                       [&](const AllocatorSetting& s) { return s.label == c.allocator_label; }))
        settings.push_back({c.allocator_label, c.allocator});
    const std::vector<std::string> labels = baseline_choices(settings);
    if (std::find(labels.begin(), labels.end(), a.baseline) == labels.end())
      throw UsageError(fmt::format("merge: --baseline: '{}' is not an allocator of the merged runs (valid: {})", a.baseline,
                                   fmt::join(labels, ", ")));
    report.baseline = a.baseline;
  }
  if (!a.metrics.empty()) report.metrics = parse_metrics_flag(a.metrics);
  report.command_line = command_line;
  report.started_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
  OutputFolder folder(a.output, a.overwrite ? OutputMode::Overwrite : OutputMode::Fresh, "--output", report_files());
  {
    SignalsHeld held;
    for (const MergedCase& f : merged.files) {
      std::filesystem::create_directories(std::filesystem::path(a.output) / "cases");
      write_file_atomically(case_file_path(a.output, f.id), f.text);
    }
    write_reports(report, a.output, formats);
  }
  std::cout << markdown_table(report);
  if (!a.quiet) {
    for (const auto& note : merged.notes) std::cerr << "gpumembench merge: " << note << "\n";
    std::cerr << fmt::format("gpumembench merge: {} case{} from {} folder{} written to {}/\n", report.cases.size(),
                             report.cases.size() == 1 ? "" : "s", a.dirs.size(), a.dirs.size() == 1 ? "" : "s", a.output);
  }
  int status = 0;
  if (!merged.missing.empty()) {
    std::cerr << fmt::format("gpumembench merge: {} case{} of the sweep {} no file:\n", merged.missing.size(),
                             merged.missing.size() == 1 ? "" : "s", merged.missing.size() == 1 ? "has" : "have");
    for (std::size_t i = 0; i < merged.missing.size() && i < 50; ++i) std::cerr << "  " << merged.missing[i] << "\n";
    if (merged.missing.size() > 50) std::cerr << "  ...\n";
    status = 1;
  }
  for (const auto& c : report.cases)
    if (!c.error.empty()) {
      std::cerr << "gpumembench merge: case " << c.label << " failed: " << c.error << "\n";
      status = 1;
    }
  return status;
}

}  // namespace gmb
