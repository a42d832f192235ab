// What the binary says about its own build (gpumembench --version) and where it finds the
// files installed with it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gmb {

// The PyTorch release whose CUDACachingAllocator the `caching` allocator reproduces.
inline constexpr const char* kReproducedPyTorchRelease = "2.11";

const char* build_version();     // the project version, e.g. "0.1.0"
const char* build_git_commit();  // `git describe --always --dirty` at build time, or "unknown"
// The CUDA toolkit version the CUDA path was built with; empty in a sim-only build.
const char* build_cuda_version();
// How a replay's per-event loops were compiled (CMakeLists.txt, GMB_PGO): "off", "generate" or
// "use" (profile-guided).
const char* build_pgo_mode();

// The text of `gpumembench --version`: version, commit, CUDA path, how the replay loops were
// compiled, the pages of the large buffers (common/huge_page_allocator.h), PyTorch release.
std::string version_text();

// The folders that hold the shipped configs, in lookup order: the installed ones
// (<prefix>/share/gpumembench/configs next to the binary's bin/), then, for a binary inside the
// build tree it was built in, the source tree's configs/. Only folders that exist.
std::vector<std::filesystem::path> shipped_config_dirs();
// The plotting script (installed: <prefix>/share/gpumembench/plot.py; build tree:
// scripts/plot.py of the source tree), or nothing when neither is there.
std::optional<std::filesystem::path> plot_script();

}  // namespace gmb
