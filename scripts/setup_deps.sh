#!/usr/bin/env bash
# Installs the Debian packages gpumembench builds with, where any is missing.
# The CUDA toolkit (nvcc) is optional: where it is installed (the CI and GPU machines) the build
# has the CUDA path, elsewhere it is a sim-only build (--device sim).
set -euo pipefail
packages=(cmake ninja-build g++ libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libfmt-dev
          libgtest-dev libbenchmark-dev zlib1g-dev libdeflate-dev libssl-dev python3-matplotlib
          dpkg-dev  # dpkg-shlibdeps: the Debian package's dependencies (cpack, the package test)
          texlive-latex-base texlive-latex-recommended  # pdflatex and booktabs: the LaTeX test
          clang libclang-rt-dev)  # the sanitized unit tests and the fuzz targets (scripts/sanitize_fuzz.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "setup_deps: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  elif command -v dpkg >/dev/null; then
    echo "setup_deps: missing Debian packages: ${missing[*]} (install them as root)" >&2
    exit 1
  fi
fi
# Optional: faster gzip (ISA-L streams it 2.5x as fast as zlib). The build does without it, so a
# machine that cannot install it still builds and passes the tests.
if ! dpkg -s libisal-dev >/dev/null 2>&1 && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "setup_deps: installing libisal-dev (optional)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libisal-dev >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libisal-dev >/dev/null 2>&1; } \
    || echo "setup_deps: libisal-dev could not be installed: gzip traces are inflated by zlib"
fi
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] \
  || echo "setup_deps: no nvcc (CUDA toolkit): the build will be sim-only (--device sim; no --device cuda)"
