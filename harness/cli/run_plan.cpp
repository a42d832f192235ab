#include "harness/cli/run_plan.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "common/units.h"
#include "devices/cuda_path.h"
#include "harness/cli/size_flag.h"
#include "harness/config/yaml_reader.h"

namespace gmb {

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
  try {
    return parse_size_flag("--capacity", text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// Resolves the device choice and says so in one line when falling back to sim.
DeviceSpec choose_device(DeviceSpec spec, bool quiet) {
  if (spec.choice == DeviceChoice::Cuda && !cuda_device_available())
    throw UsageError(cuda_unavailable_message());
  if (spec.choice == DeviceChoice::Auto) {
    spec.choice = resolve_device(DeviceChoice::Auto);
    if (spec.choice == DeviceChoice::Sim && !quiet)
      std::cerr << "gpumembench: no GPU visible; running on the simulated device (--device sim)\n";
  }
  return spec;
}

PlannedRun plan_run(const RunArgs& a, bool quiet) {
  PlannedRun p;
  p.config = load_config(a.config);  // throws ConfigError: nothing has run
  if (a.steps) p.config.run.max_steps = a.steps;
  try {
    select_allocators(p.config, a.allocators);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  p.spec = p.config.device;
  if (!a.device.empty()) p.spec.choice = parse_device_choice(a.device);
  if (!a.capacity.empty()) p.spec.capacity_bytes = parse_capacity(a.capacity);
  p.spec = choose_device(p.spec, quiet);
  // A capacity sweep (`device: {capacity: [8GiB, 12GiB]}`): one set of cases per capacity,
  // labelled "... @ 8.00 GiB". --capacity replaces the sweep with one capacity.
  std::vector<Bytes> capacities = {p.spec.capacity_bytes};
  if (a.capacity.empty() && p.config.capacities.size() > 1) p.capacity_sweep = capacities = p.config.capacities;
  try {
    p.cases = plan_cases(p.config, p.spec.choice, capacities, !p.capacity_sweep.empty());
  } catch (const CasePlanError& e) {
    throw UsageError(e.what());
  }
  return p;
}


}  // namespace gmb
