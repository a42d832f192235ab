#!/usr/bin/env bash
# Configures and builds gpumembench into ${BUILD_DIR:-build}. Extra arguments go to cmake.
#   BUILD_TARGET="T..."  build only these targets (default: everything, tests and benchmarks)
#   GMB_PGO=1        profile-guided (g++): a replay's per-event loops are built instrumented,
#                    scripts/pgo_train.sh runs replays with them, and they are built again with
#                    the profile (CMakeLists.txt, GMB_PGO). scripts/install.sh does this.
#   GMB_PGO=0        (default) a plain build; a build folder that held a profile-guided build
#                    compiles those files again without it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
build="${BUILD_DIR:-build}"
target=()
read -ra names <<< "${BUILD_TARGET:-}"
[ ${#names[@]} -gt 0 ] && target=(--target "${names[@]}")
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$build/CMakeCache.txt" ] && gen=()
configure() { cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null; gen=(); }
if [ "${GMB_PGO:-0}" = 1 ]; then
  profile="$(cd "$(dirname "$build")" && pwd)/$(basename "$build")/pgo-profile"
  rm -rf "$profile"  # counts of older code would be merged into the new ones
  configure -DGMB_PGO=generate -DGMB_PGO_DIR="$profile" "$@"
  cmake --build "$build" --target gpumembench -j"$(nproc)"
  scripts/pgo_train.sh "$build"
  configure -DGMB_PGO=use -DGMB_PGO_DIR="$profile" "$@"
else
  configure -DGMB_PGO=off "$@"
fi
cmake --build "$build" "${target[@]}" -j"$(nproc)"
