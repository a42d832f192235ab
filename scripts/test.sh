#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite (CTest: GoogleTest, CLI and
# plot tests; GPU tests skip themselves without a GPU). GMB_SANITIZE_FUZZ=1 adds the sanitized unit
# tests and a short fuzzing run of every reader of outside input (scripts/sanitize_fuzz.sh); it is
# opt-in until a whole run of it has been timed and seen clean on the CI machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_deps.sh
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j"$(nproc)")
[ "${GMB_SANITIZE_FUZZ:-0}" = 1 ] && scripts/sanitize_fuzz.sh
exit 0
