// A sticky CUDA error on demand, for the test that proves GPU cases are isolated: with
// GMB_INJECT_CUDA_FAULT=TEXT in the environment, a GPU case whose label contains TEXT first makes
// the GPU write to an invalid address. The CUDA context of that process is then unusable (every
// later CUDA call fails), as after a real illegal access in a kernel or an Xid: the case must end
// as a recorded error and the next case must run normally.
#pragma once

#include <string>

namespace gmb {

// Launches the faulting kernel when GMB_INJECT_CUDA_FAULT is set and `label` contains it; returns
// whether it did. A sim-only build never faults (returns false).
bool inject_cuda_fault_if_asked(const std::string& label);

}  // namespace gmb
