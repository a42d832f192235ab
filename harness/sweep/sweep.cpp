#include "harness/sweep/sweep.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "harness/io/atomic_write.h"
#include "harness/report/report.h"
#include "harness/run/case_file.h"
#include "harness/run/stop_request.h"
#include "harness/run/workload_need.h"

namespace gmb {

namespace {

namespace fs = std::filesystem;

// A case file from an earlier run that stands for this case: the same id and the same spec.
std::optional<CaseResult> earlier_result(const std::string& path, const PlannedCase& c,
                                         std::vector<std::string>& notes) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  try {
    LoadedCase loaded = read_case_file(path);
    if (loaded.header.id == c.id && loaded.header.spec == c.spec) {
      if (loaded.result.error.empty()) return std::move(loaded.result);
      notes.push_back(fmt::format("{}: the case could not run before ({}): running it again", path, loaded.result.error));
      return std::nullopt;
    }
    notes.push_back(fmt::format("{}: not the case {} of this run (its spec differs): running the case again", path, c.id));
  } catch (const CaseFileError& e) {
    notes.push_back(fmt::format("{}: running the case again", e.what()));
  }
  return std::nullopt;
}

}  // namespace

SweepResult run_sweep(const Config& config, const DeviceSpec& device, const std::vector<PlannedCase>& plan,
                      RunReport header, const std::string& dir, bool resume, const SweepObserver& observer) {
  SweepResult out;
  out.report = std::move(header);
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "cases", ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create {}: {}", (fs::path(dir) / "cases").string(), ec.message()));
  // Each workload's need, computed once for all its allocators and capacities.
  std::vector<std::shared_ptr<const WorkloadNeed>> needs(config.workloads.size());
  for (const PlannedCase& c : plan) {
    const std::string path = case_file_path(dir, c.id);
    if (resume)
      if (std::optional<CaseResult> done = earlier_result(path, c, out.notes)) {
        out.report.cases.push_back(std::move(*done));
        ++out.reused;
        continue;
      }
    if (stop_requested()) {
      out.stopped = true;
      break;
    }
    const AllocatorSpec& a = config.allocators[c.allocator_index];
    const WorkloadSpec& w = config.workloads[c.workload_index];
    if (!needs[c.workload_index]) {
      auto workload = w.make();
      needs[c.workload_index] = std::make_shared<const WorkloadNeed>(compute_workload_need(*workload, config.run.max_steps));
    }
    DeviceSpec case_device = device;
    case_device.capacity_bytes = c.capacity_bytes;
    CaseSpec cs{a.name, case_options(a, w), w.make, needs[c.workload_index]};
    const std::string started_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
    if (observer.start_case) observer.start_case(c.index, c.label);
    CaseResult done = run_case(cs, case_device, config.run, observer.step);
    if (observer.end_case) observer.end_case();
    if (!a.label.empty()) {  // the config's `label:` names the setting in every table
      done.label = a.label + done.label.substr(std::min(done.label.size(), done.allocator_label.size()));
      done.allocator_label = a.label;
    }
    done.label += c.at;
    CaseFileHeader h{c.id,
                     c.spec,
                     out.report.tool_version,
                     out.report.config_name,
                     out.report.config_path,
                     out.report.command_line,
                     started_at,
                     utc_now("%Y-%m-%dT%H:%M:%SZ"),
                     out.report.device};
    {
      SignalsHeld held;  // a second Ctrl-C waits for the file to be whole
      write_file_atomically(path, case_file_json(h, done).dump() + "\n");
    }
    out.report.cases.push_back(std::move(done));
    ++out.ran;
  }
  if (resume) {  // files of other cases (another config, flags or version) stay, out of the tables
    std::set<std::string> planned;
    for (const PlannedCase& c : plan) planned.insert(c.id + ".json");
    std::size_t others = 0;
    for (const auto& e : fs::directory_iterator(fs::path(dir) / "cases", ec))
      if (e.path().extension() == ".json" && !planned.count(e.path().filename().string())) ++others;
    if (others)
      out.notes.push_back(fmt::format("{} case file{} in {} belong to other cases (another config, flags or version): "
                                      "left there, not in the tables",
                                      others, others == 1 ? "" : "s", (fs::path(dir) / "cases").string()));
  }
  return out;
}

}  // namespace gmb
