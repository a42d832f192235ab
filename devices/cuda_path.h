// Whether this build has the CUDA path (the real GPU device and the transformer's GPU compute),
// configured with GMB_WITH_CUDA=ON or found by AUTO. A sim-only build (GMB_WITH_CUDA=OFF, or no
// CUDA toolkit) has stand-ins that say so: make_cuda_device throws DeviceError with
// kNoCudaPathMessage and cuda_device_available() is false.
#pragma once

#include <string>

namespace gmb {

bool cuda_path_built_in();

inline constexpr const char* kNoCudaPathMessage =
    "this gpumembench is a sim-only build without the CUDA path (configured with GMB_WITH_CUDA=OFF or "
    "without a CUDA toolkit); use --device sim, or rebuild where nvcc and the CUDA toolkit are installed";

// The usage error for `--device cuda` (or a config's device kind cuda) where it cannot run.
inline std::string cuda_unavailable_message() {
  return std::string("--device cuda: ") + (cuda_path_built_in() ? "no CUDA GPU is visible" : kNoCudaPathMessage);
}

}  // namespace gmb
