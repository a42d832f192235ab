#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (CTest: GoogleTest, CLI, plot, install and
# package tests; GPU tests skip themselves without a GPU), in both configurations: the default
# build (the CUDA path where nvcc is found) in ${BUILD_DIR:-build}, and the sim-only build
# (GMB_WITH_CUDA=OFF: what a machine without the CUDA toolkit builds) in ${SIM_BUILD_DIR:-build-sim}.
# GMB_SANITIZE_FUZZ=1 adds the sanitized unit tests and a short fuzzing run of every reader of
# outside input (scripts/sanitize_fuzz.sh); it is opt-in until a whole run of it has been timed
# and seen clean on the CI machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_deps.sh
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)")
BUILD_DIR="${SIM_BUILD_DIR:-build-sim}" scripts/build.sh -DGMB_WITH_CUDA=OFF -DGMB_BUILD_BENCH=OFF
(cd "${SIM_BUILD_DIR:-build-sim}" && ctest --output-on-failure -j"$(nproc)")
[ "${GMB_SANITIZE_FUZZ:-0}" = 1 ] && scripts/sanitize_fuzz.sh
exit 0
