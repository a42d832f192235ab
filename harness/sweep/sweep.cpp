#include "harness/sweep/sweep.h"

#include "devices/cuda_fault.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "allocators/registry.h"
#include "devices/device.h"
#include "harness/io/atomic_write.h"
#include "harness/report/report.h"
#include "harness/run/stop_request.h"

namespace gmb {

namespace {

namespace fs = std::filesystem;

// The labels of the tables: the config's `label:` names the setting in every table, and a
// capacity sweep adds " @ 8.00 GiB".
void label_case(CaseResult& done, const AllocatorSpec& a, const PlannedCase& c) {
  if (!a.label.empty()) {
    done.label = a.label + done.label.substr(std::min(done.label.size(), done.allocator_label.size()));
    done.allocator_label = a.label;
  }
  done.label += c.at;
}

void write_case_file(const PlannedCase& c, const RunReport& header, const CaseFiles& files,
                     const std::string& started_at, const CaseResult& done) {
  CaseFileHeader h{c.id,
                   c.spec,
                   header.tool_version,
                   header.config_name,
                   header.config_path,
                   header.command_line,
                   started_at,
                   utc_now("%Y-%m-%dT%H:%M:%SZ"),
                   header.device,
                   c.index,
                   files.plan_cases,
                   header.baseline,
                   files.formats,
                   header.metrics};
  SignalsHeld held;  // a second Ctrl-C waits for the file to be whole
  write_file_atomically(case_file_path(files.dir, c.id), case_file_text(h, done) + "\n");
}

// The GPU this process sees, just before a case on it (a worker pinned by CUDA_VISIBLE_DEVICES).
std::optional<CaseGpu> gpu_before_case(const DeviceSpec& device) {
  if (resolve_device(device.choice) != DeviceChoice::Cuda) return std::nullopt;
  try {
    const DeviceInfo info = cuda_device_info();
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return CaseGpu{info.name, info.uuid, visible ? visible : "", info.capacity_bytes, info.total_bytes};
  } catch (const DeviceError&) {
    return std::nullopt;  // the case itself reports the device's error
  }
}

}  // namespace

std::optional<CaseResult> finished_case(const std::string& path, const PlannedCase& c, std::vector<std::string>& notes) {
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

CaseResult run_planned_case(const Config& config, const DeviceSpec& device, const PlannedCase& c,
                            const RunReport& header, const CaseFiles& files, const SweepObserver& observer,
                            std::shared_ptr<const WorkloadNeed> need) {
  const AllocatorSpec& a = config.allocators[c.allocator_index];
  const WorkloadSpec& w = config.workloads[c.workload_index];
  DeviceSpec case_device = device;
  case_device.capacity_bytes = c.capacity_bytes;
  case_device.ordinal = w.recorded_device;
  CaseSpec cs{a.name, case_options(a, w), w.make, std::move(need)};
  const std::string started_at = utc_now("%Y-%m-%dT%H:%M:%SZ");
  std::optional<CaseGpu> gpu = gpu_before_case(device);
  if (observer.start_case) observer.start_case(c.index, c.label);
  if (resolve_device(device.choice) == DeviceChoice::Cuda) inject_cuda_fault_if_asked(c.label);  // tests only
  CaseResult done = run_case(cs, case_device, case_settings(config.run, a, w), observer.step);
  if (observer.end_case) observer.end_case();
  label_case(done, a, c);
  done.gpu = std::move(gpu);
  write_case_file(c, header, files, started_at, done);
  return done;
}

CaseResult write_failed_case(const Config& config, const PlannedCase& c, const RunReport& header,
                             const CaseFiles& files, const std::string& error) {
  const AllocatorSpec& a = config.allocators[c.allocator_index];
  const WorkloadSpec& w = config.workloads[c.workload_index];
  CaseResult failed;
  failed.allocator = a.name;
  failed.options = case_options(a, w);
  failed.allocator_label = allocator_label(a.name, failed.options);
  failed.workload = w.kind;
  try {
    failed.workload_label = w.make()->label();
  } catch (const std::exception&) {
    failed.workload_label = w.kind;
  }
  failed.label = failed.allocator_label + " x " + failed.workload_label;
  failed.capacity_requested_bytes = c.capacity_bytes;
  failed.error = error;
  label_case(failed, a, c);
  write_case_file(c, header, files, utc_now("%Y-%m-%dT%H:%M:%SZ"), failed);
  return failed;
}

std::string other_case_files_note(const std::string& dir, const std::vector<PlannedCase>& plan) {
  std::set<std::string> planned;
  for (const PlannedCase& c : plan) planned.insert(c.id + ".json");
  std::size_t others = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(dir) / "cases", ec))
    if (e.path().extension() == ".json" && !planned.count(e.path().filename().string())) ++others;
  if (!others) return "";
  return fmt::format("{} case file{} in {} belong to other cases (another config, flags, shard or version): "
                     "left there, not in the tables",
                     others, others == 1 ? "" : "s", (fs::path(dir) / "cases").string());
}

SweepResult run_sweep(const Config& config, const DeviceSpec& device, const std::vector<PlannedCase>& plan,
                      RunReport header, const CaseFiles& files, bool resume, const SweepObserver& observer) {
  SweepResult out;
  out.report = std::move(header);
  std::error_code ec;
  fs::create_directories(fs::path(files.dir) / "cases", ec);
  if (ec)
    throw std::runtime_error(fmt::format("cannot create {}: {}", (fs::path(files.dir) / "cases").string(), ec.message()));
  // Each workload's need, computed once for all its allocators and capacities.
  std::vector<std::shared_ptr<const WorkloadNeed>> needs(config.workloads.size());
  for (const PlannedCase& c : plan) {
    if (resume)
      if (std::optional<CaseResult> done = finished_case(case_file_path(files.dir, c.id), c, out.notes)) {
        out.report.cases.push_back(std::move(*done));
        ++out.reused;
        continue;
      }
    if (stop_requested()) {
      out.stopped = true;
      break;
    }
    // The first case of a workload computes its need (run_case: on sim from its own run); the
    // others reuse it.
    out.report.cases.push_back(
        run_planned_case(config, device, c, out.report, files, observer, needs[c.workload_index]));
    if (!needs[c.workload_index]) needs[c.workload_index] = out.report.cases.back().need;
    ++out.ran;
  }
  if (resume) {  // files of other cases (another config, flags or version) stay, out of the tables
    const std::string note = other_case_files_note(files.dir, plan);
    if (!note.empty()) out.notes.push_back(note);
  }
  return out;
}

}  // namespace gmb
