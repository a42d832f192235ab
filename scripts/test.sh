#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (CTest: GoogleTest, CLI, plot, install and
# package tests; GPU tests skip themselves without a GPU), in both configurations:
#   - the default build (g++, the CUDA path where nvcc is found) in ${BUILD_DIR:-build};
#   - the sim-only build (GMB_WITH_CUDA=OFF: what a machine without the CUDA toolkit builds) in
#     ${SIM_BUILD_DIR:-build-sim}, with clang, AddressSanitizer, UndefinedBehaviorSanitizer and
#     libFuzzer coverage, then a short fuzzing run of every reader of outside input
#     (scripts/sanitize_fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_deps.sh
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)")
SAN_BUILD_DIR="${SIM_BUILD_DIR:-build-sim}" scripts/sanitize_fuzz.sh
exit 0
