#!/usr/bin/env bash
# README setup command 2: builds gpumembench and installs it into ${PREFIX:-/usr/local}:
# bin/gpumembench (on the PATH), share/gpumembench (the configs with their traces, plot.py) and
# share/doc/gpumembench. Extra arguments go to cmake (e.g. -DGMB_WITH_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
build="${BUILD_DIR:-build}"
prefix="${PREFIX:-/usr/local}"
# Profile-guided by default with g++ (scripts/build.sh, GMB_PGO=1): replays a few percent faster
# (README, "Speed of the harness itself"); GMB_PGO=0 for a plain build.
BUILD_DIR="$build" BUILD_TARGET=gpumembench GMB_PGO="${GMB_PGO:-1}" scripts/build.sh "$@"
cmake --install "$build" --prefix "$prefix" >/dev/null
echo "install: $prefix/bin/gpumembench ($("$prefix/bin/gpumembench" --version | head -1))"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "install: $prefix/bin is not on your PATH; add it: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
