#include "about/build_info.h"

#include <fmt/format.h>

#include "common/huge_page_allocator.h"

namespace gmb {

const char* build_version() { return GMB_VERSION_STRING; }

const char* build_cuda_version() { return GMB_CUDA_TOOLKIT_VERSION; }

const char* build_pgo_mode() { return GMB_PGO_MODE; }

std::string version_text() {
  const std::string cuda = *build_cuda_version()
                               ? fmt::format("built in (CUDA {}; runs on a GPU with --device cuda)", build_cuda_version())
                               : std::string("not built in (sim-only build: --device sim only)");
  const std::string mode = build_pgo_mode();
  const char* loops = mode == "use"        ? "profile-guided (GMB_PGO=use: the profile of scripts/pgo_train.sh's replays)"
                      : mode == "generate" ? "instrumented (GMB_PGO=generate: writes a profile, slower; not for timings)"
                                           : "plain (GMB_PGO=off: -O3, no profile)";
  return fmt::format(
      "gpumembench {}\n"
      "commit: {}\n"
      "CUDA path: {}\n"
      "replay loops: {}\n"
      "large buffers: {}\n"
      "caching allocator: reproduces PyTorch {}'s CUDACachingAllocator\n",
      build_version(), build_git_commit(), cuda, loops, huge_pages::choice_text(), kReproducedPyTorchRelease);
}

}  // namespace gmb
