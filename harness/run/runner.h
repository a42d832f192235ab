// One case = workload x allocator x device: runs the workload's ops through the allocator
// and measures. An OOM inside a case is a result, never a crash.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "allocators/allocator.h"
#include "allocators/adaptors/logging_allocator.h"
#include "devices/device_call.h"
#include "harness/run/results.h"
#include "workloads/workload.h"

namespace gmb {

enum class OnOom { Stop, SkipStep, Continue };
const char* to_string(OnOom policy);

enum class DeviceChoice { Auto, Sim, Cuda };

struct DeviceSpec {
  DeviceChoice choice = DeviceChoice::Auto;
  Bytes capacity_bytes = 0;  // 0: the whole card (sim: the H200's, 139.80 GiB)
  Bytes card_bytes = 0;      // sim: the card the capacity is left on (0: the capacity); cuda: the real one
  int ordinal = 0;           // sim: the GPU number messages name (DeviceInfo::ordinal); cuda: always 0
};

// Resolves auto: cuda where a GPU is visible, else sim.
DeviceChoice resolve_device(DeviceChoice choice);
std::unique_ptr<Device> make_device(const DeviceSpec& spec);
// What make_device(spec) would make, without making it (no ballast is taken): kind, name, driver,
// page size; on cuda the capacity is planned from the free memory now, not measured.
DeviceInfo describe_device(const DeviceSpec& spec);
// The device the cases ran on, as the first case that made one measured it. Throws DeviceError
// (the first case's error) when none could make a device.
DeviceInfo device_of_cases(const std::vector<CaseResult>& cases);

struct CaseSpec {
  std::string allocator;
  AllocatorOptions options;
  std::function<std::unique_ptr<Workload>()> make_workload;
  // The workload's need over the steps the run makes (compute_workload_need with the run's
  // max_steps), shared by the cases that run the same workload; null: run_case computes it.
  std::shared_ptr<const WorkloadNeed> need = nullptr;
};

struct RunSettings {
  OnOom on_oom = OnOom::Stop;
  std::uint64_t repeat = 1;
  bool timeline = false;       // keep the per-event timeline of the first run
  bool oom_block_map = true;   // keep the segment map, every OOM and the usage up to the first OOM
  std::uint64_t max_steps = 0;  // > 0: at most this many steps of each workload (--steps)
  // Sim only: (bytes, address) of recorded cudaMallocs, handed out in order while the sizes
  // agree (RecordedPlacementDevice): a PyTorch snapshot replayed with its own settings.
  std::vector<std::pair<Bytes, DevPtr>> segment_placements;
  // First run only: every allocator event (allocations, frees, failures, segment changes) as it
  // happens, through logging adaptors around the allocator and its device (--export-rmm-log).
  // The release of what is still live when the workload ends is not reported.
  AllocatorEventSink* event_sink = nullptr;
  // First run only: every device call its allocator made (cudaMalloc / cudaFree, page maps and
  // unmaps), up to the workload's end, each marked with the allocator call it came in: the
  // allocator's allocs + frees + OOMs before it (the caching allocator counts each call it is
  // given once, and none for zero bytes). The CLI's snapshot self-check reads them on sim.
  std::vector<DeviceCall>* device_calls = nullptr;
  // Called once the first run's device is made, before the run, with what result.device will
  // hold and the options the allocator is made with (a capacity that is the caching allocator's
  // limit adds memory_limit_bytes, and the device then has room above it): work that needs
  // them can start beside the run (the CLI starts a snapshot's self-check on another thread,
  // which models the same device and limit).
  std::function<void(const DeviceInfo&, const AllocatorOptions&)> on_device_ready;
  // Threads of this process that run beside the run (the self-check that on_device_ready
  // starts): the workload's ops are made on a worker thread only where a core is left over.
  unsigned threads_beside = 0;
};

// Called after every step: (repeat index, step, steps in total).
using ProgressFn = std::function<void(std::uint64_t, std::uint64_t, std::uint64_t)>;

CaseResult run_case(const CaseSpec& spec, const DeviceSpec& device, const RunSettings& settings,
                    const ProgressFn& progress = {});

}  // namespace gmb
