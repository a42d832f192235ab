#include "about/build_info.h"

#include <fmt/format.h>

namespace gmb {

const char* build_version() { return GMB_VERSION_STRING; }

const char* build_cuda_version() { return GMB_CUDA_TOOLKIT_VERSION; }

std::string version_text() {
  const std::string cuda = *build_cuda_version()
                               ? fmt::format("built in (CUDA {}; runs on a GPU with --device cuda)", build_cuda_version())
                               : std::string("not built in (sim-only build: --device sim only)");
  return fmt::format(
      "gpumembench {}\n"
      "commit: {}\n"
      "CUDA path: {}\n"
      "caching allocator: reproduces PyTorch {}'s CUDACachingAllocator\n",
      build_version(), build_git_commit(), cuda, kReproducedPyTorchRelease);
}

}  // namespace gmb
