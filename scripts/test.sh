#!/usr/bin/env bash
# README command 2: set up, build, and run the whole test suite (CTest: GoogleTest, CLI and
# plot tests; GPU tests skip themselves without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)"
