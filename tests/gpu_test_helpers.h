// Shared by the Gpu* tests: skipping without a GPU, and the hole pattern on either device.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "devices/device.h"
#include "harness/run/runner.h"
#include "workloads/hole_pattern.h"

// GPU tests run on the H200 through the device tool and skip themselves elsewhere.
#define REQUIRE_GPU() \
  if (!gmb::cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible"

namespace gmb::testing {

// The default hole pattern (100/200/300 MiB, free the 200, ask 250) on an 8 GiB device.
inline CaseResult gpu_hole_case(DeviceChoice choice, const std::string& allocator,
                                AllocatorOptions options = {}) {
  CaseSpec spec{allocator, std::move(options), [] { return make_hole_pattern(HolePatternParams{}); }};
  return run_case(spec, DeviceSpec{choice, 8 * GiB}, RunSettings{});
}

}  // namespace gmb::testing
