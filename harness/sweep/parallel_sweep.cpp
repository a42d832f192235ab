#include "harness/sweep/parallel_sweep.h"

#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "harness/run/stop_request.h"

namespace gmb {

namespace {

namespace fs = std::filesystem;

// A worker ended by the stop request (its first signal lets it finish the case; a second ends it
// without a file): its case is not done, nor failed; --resume runs it.
bool ended_by_stop(int status) {
  if (!stop_requested()) return false;
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : WIFEXITED(status) ? WEXITSTATUS(status) - 128 : 0;
  return sig == SIGINT || sig == SIGTERM;
}

}  // namespace

std::string worker_step_line(std::uint64_t repeat, std::uint64_t step, std::uint64_t steps) {
  return fmt::format("step {} {} {}\n", repeat, step, steps);
}

bool parse_worker_step_line(const std::string& line, std::uint64_t& repeat, std::uint64_t& step, std::uint64_t& steps) {
  std::istringstream in(line);
  std::string word;
  return in >> word && word == "step" && in >> repeat >> step >> steps;
}

SweepResult run_sweep_in_workers(const Config& config, const std::vector<PlannedCase>& plan, RunReport header,
                                 const CaseFiles& files, bool resume, const WorkerSetup& workers,
                                 const WorkerObserver& observer) {
  SweepResult out;
  out.report = std::move(header);
  std::error_code ec;
  fs::create_directories(fs::path(files.dir) / "cases", ec);
  if (ec)
    throw std::runtime_error(fmt::format("cannot create {}: {}", (fs::path(files.dir) / "cases").string(), ec.message()));
  std::map<std::size_t, CaseResult> results;  // by position in the plan
  std::optional<DeviceInfo> device;           // as the first worker's case file describes it
  std::vector<WorkerJob> jobs;
  for (std::size_t k = 0; k < plan.size(); ++k) {
    const PlannedCase& c = plan[k];
    if (resume)
      if (std::optional<CaseResult> done = finished_case(case_file_path(files.dir, c.id), c, out.notes)) {
        results[k] = std::move(*done);
        ++out.reused;
        continue;
      }
    WorkerJob job{k, workers.argv};
    job.argv.push_back("--worker-case");
    job.argv.push_back(c.id);
    jobs.push_back(std::move(job));
  }
  WorkerEvents events;
  events.started = [&](const WorkerJob& job, const WorkerSlot& slot) {
    if (observer.start_case) observer.start_case(plan[job.key].index, slot.name);
  };
  events.line = [&](const WorkerJob& job, const std::string& line) {
    std::uint64_t r = 0, s = 0, n = 0;
    if (parse_worker_step_line(line, r, s, n) && observer.step) observer.step(plan[job.key].index, r, s, n);
  };
  events.ended = [&](const WorkerJob& job, const WorkerSlot& slot, int status) {
    const PlannedCase& c = plan[job.key];
    if (observer.end_case) observer.end_case(c.index);
    const std::string path = case_file_path(files.dir, c.id);
    std::string why;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      try {
        LoadedCase loaded = read_case_file(path);
        if (loaded.header.id == c.id && loaded.header.spec == c.spec) {
          if (!device) device = loaded.header.device;
          results[job.key] = std::move(loaded.result);
          ++out.ran;
          return;
        }
        why = "its case file is not this case's";
      } catch (const CaseFileError& e) {
        why = e.what();
      }
    } else if (ended_by_stop(status)) {
      return;
    }
    const std::string error = fmt::format("the worker process of this case ({}) {}{}", slot.name,
                                          wait_status_text(status), why.empty() ? "" : "; " + why);
    results[job.key] = write_failed_case(config, c, out.report, files, error);
    ++out.ran;
  };
  const bool all_started = run_worker_pool(workers.slots, jobs, events);
  out.stopped = !all_started || results.size() < plan.size();
  for (auto& [k, result] : results) out.report.cases.push_back(std::move(result));
  for (std::size_t k = 0; !device && k < plan.size(); ++k) {  // a resumed run: its earlier workers' device
    try {
      if (fs::exists(case_file_path(files.dir, plan[k].id))) device = read_case_file(case_file_path(files.dir, plan[k].id)).header.device;
    } catch (const CaseFileError&) {
    }
  }
  if (device) out.report.device = *device;
  if (resume) {
    const std::string note = other_case_files_note(files.dir, plan);
    if (!note.empty()) out.notes.push_back(note);
  }
  return out;
}

}  // namespace gmb
