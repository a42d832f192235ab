#include "harness/cli/sweep_cli.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>

#include <fmt/format.h>

#include "devices/device.h"
#include "harness/cli/metrics_flag.h"
#include "harness/config/yaml_reader.h"
#include "harness/report/report.h"
#include "harness/run/stop_request.h"
#include "harness/sweep/sweep.h"

namespace gmb {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      out.push_back(item);
      item.clear();
    } else {
      item += text[i];
    }
  }
  return out;
}

// --gpus all|0,1,...: the GPUs as this process numbers them, each pinned in its worker by
// CUDA_VISIBLE_DEVICES (the entry of this process's own list when it has one).
std::vector<WorkerSlot> gpu_slots(const std::string& flag) {
  const int count = cuda_device_count();
  if (count <= 0) throw UsageError(fmt::format("--gpus {}: no CUDA GPU is visible", flag));
  std::vector<int> chosen;
  if (flag == "all") {
    for (int g = 0; g < count; ++g) chosen.push_back(g);
  } else {
    std::set<int> seen;
    for (const std::string& item : split(flag, ',')) {
      if (item.empty() || item.size() > 4 || item.find_first_not_of("0123456789") != std::string::npos)
        throw UsageError(fmt::format("--gpus {}: '{}' is not a GPU number (all, or a list such as 0,1)", flag, item));
      const int g = std::stoi(item);
      if (g >= count)
        throw UsageError(fmt::format("--gpus {}: GPU {} is not visible (this machine shows {} GPU{}: 0 to {})", flag, g,
                                     count, count == 1 ? "" : "s", count - 1));
      if (!seen.insert(g).second) throw UsageError(fmt::format("--gpus {}: GPU {} is listed twice", flag, g));
      chosen.push_back(g);
    }
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::vector<std::string> visible_list = visible ? split(visible, ',') : std::vector<std::string>{};
  std::vector<WorkerSlot> slots;
  for (int g : chosen) {
    const std::string pin =
        static_cast<std::size_t>(g) < visible_list.size() ? visible_list[static_cast<std::size_t>(g)] : std::to_string(g);
    slots.push_back({fmt::format("GPU {}", g), {"CUDA_VISIBLE_DEVICES=" + pin}});
  }
  return slots;
}

}  // namespace

Shard resolve_shard(const std::string& flag, bool quiet) {
  try {
    Shard shard;
    if (!flag.empty()) {
      shard = parse_shard(flag);
    } else if (auto env = shard_from_environment([](const char* name) { return std::getenv(name); })) {
      shard = *env;
    } else {
      return Shard{0, 1, ""};
    }
    if (!quiet) std::cerr << fmt::format("gpumembench: shard {} (from {})\n", shard.text(), shard.source);
    return shard;
  } catch (const ShardError& e) {
    throw UsageError(e.what());
  }
}

std::optional<WorkerSetup> worker_setup(const RunArgs& a, const PlannedRun& p, const std::string& baseline,
                                        const std::vector<std::string>& formats, const std::string& out_dir,
                                        const std::string& command_line) {
  if (a.in_process && (a.jobs || !a.gpus.empty()))
    throw UsageError("--in-process runs every case in this process; --jobs and --gpus run them in worker processes");
  const bool isolated_gpu_cases = p.spec.choice == DeviceChoice::Cuda && a.gpus.empty() && a.jobs == 0 && !a.in_process;
  if (a.jobs == 0 && a.gpus.empty() && !isolated_gpu_cases) return std::nullopt;
  if (a.jobs && !a.gpus.empty()) throw UsageError("--jobs N is for sim, --gpus for cuda: give one of them");
  WorkerSetup w;
  if (isolated_gpu_cases) {
    // Without --gpus a GPU run still runs each case in a process of its own, on the GPU this
    // process would use (the environment passes on as it is): one case at a time.
    w.slots.push_back({"GPU", {}});
  } else if (!a.gpus.empty()) {
    if (p.spec.choice != DeviceChoice::Cuda)
      throw UsageError("--gpus runs cases on GPUs (--device cuda); on sim, --jobs N runs N worker processes");
    w.slots = gpu_slots(a.gpus);
  } else {
    if (p.spec.choice != DeviceChoice::Sim)
      throw UsageError("--jobs N is for --device sim; on GPUs, --gpus all|0,1,... runs one case per GPU at a time "
                       "(a case never shares its GPU)");
    if (a.jobs > static_cast<std::uint64_t>(kMaxStopForwards))
      throw UsageError(fmt::format("--jobs {}: at most {} worker processes", a.jobs, kMaxStopForwards));
    for (std::uint64_t j = 0; j < a.jobs; ++j) w.slots.push_back({fmt::format("worker {}", j + 1), {}});
  }
  w.argv = {this_executable(), "--config", a.config, "--device", p.spec.choice == DeviceChoice::Cuda ? "cuda" : "sim"};
  if (!a.capacity.empty()) w.argv.insert(w.argv.end(), {"--capacity", a.capacity});
  if (a.steps) w.argv.insert(w.argv.end(), {"--steps", std::to_string(a.steps)});
  for (const std::string& alloc : a.allocators) w.argv.insert(w.argv.end(), {"--allocator", alloc});
  if (!baseline.empty()) w.argv.insert(w.argv.end(), {"--baseline", baseline});
  w.argv.insert(w.argv.end(),
                {"--format", join(formats, ","), "--quiet", "--output", out_dir, "--worker-command", command_line});
  return w;
}

int run_worker_case(const RunArgs& a) {
  // The first signal: the case ends and its file is written. The pool started this process with
  // the signals blocked (worker_pool.h): one that came meanwhile is delivered now, to the handler.
  install_stop_handlers(true);
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
  PlannedRun p = plan_run(a, true);
  const PlannedCase* c = nullptr;
  for (const PlannedCase& planned : p.cases)
    if (planned.id == a.worker_case) c = &planned;
  if (!c)
    throw UsageError(fmt::format("--worker-case {}: not a case of {} with these flags (did the config or its input "
                                 "files change since the sweep started?)",
                                 a.worker_case, a.config));
  if (a.output.empty()) throw UsageError("--worker-case needs the sweep's --output folder");
  RunReport header;
  header.tool_version = GMB_VERSION;
  header.config_name = p.config.name;
  header.config_path = a.config;
  header.command_line = a.worker_command;
  header.on_oom = to_string(p.config.run.on_oom);
  header.repeat = p.config.run.repeat;
  header.baseline = a.baseline;
  header.metrics = a.metrics.empty() ? p.config.metrics : parse_metrics_flag(a.metrics);
  header.device = describe_device(p.spec);
  const CaseFiles files{a.output, p.cases.size(),
                        a.format.empty() ? std::vector<std::string>{"md", "csv", "json"} : parse_formats(a.format)};
  auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  SweepObserver observer;
  observer.step = [&](std::uint64_t r, std::uint64_t s, std::uint64_t n) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::milliseconds(100) && s != n) return;
    last = now;
    std::fputs(worker_step_line(r, s, n).c_str(), stdout);
    std::fflush(stdout);
  };
  run_planned_case(p.config, p.spec, *c, header, files, observer);
  return 0;
}

}  // namespace gmb
