#!/usr/bin/env bash
# README command 1: set up, build, and run the main job (the hole pattern; on the simulated
# GPU where there is none). Extra arguments go to gpumembench.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup_deps.sh
scripts/build.sh
./build/gpumembench --config configs/hole_pattern.yaml "$@"
