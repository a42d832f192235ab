#!/usr/bin/env bash
# The sim-only build under the sanitizers, as scripts/test.sh (and so CI) runs it: clang with
# AddressSanitizer + UndefinedBehaviorSanitizer (any report fails the test that made it) and
# libFuzzer coverage, GMB_WITH_CUDA=OFF, into ${SAN_BUILD_DIR:-build-sim}; then
#   1. the whole CTest suite in that build: every unit test (the GPU tests skip), the CLI,
#      install and package tests, all under the sanitizers;
#   2. each libFuzzer target for FUZZ_SECONDS (default 15; four targets: about a minute) from its
#      corpus (tests/fuzz/corpus; new inputs go to a scratch copy, not the repository).
# A finding leaves its input in $build/fuzz-findings/ and fails the script. FUZZ_RUNS=N runs
# each target N inputs instead of for a time (the long campaigns of the closing notes).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${SAN_BUILD_DIR:-build-sim}"
seconds="${FUZZ_SECONDS:-15}"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$build/CMakeCache.txt" ] && gen=()
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DGMB_WITH_CUDA=OFF -DGMB_BUILD_FUZZ=ON \
  -DGMB_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
if [ "${SAN_SKIP_CTEST:-0}" != 1 ]; then
  echo "sanitize_fuzz: the CTest suite under ASan+UBSan ($build)"
  (cd "$build" && ctest --output-on-failure -j"$(nproc)")
fi

findings="$build/fuzz-findings"
mkdir -p "$findings"
run_fuzzer() {  # target corpus-dir
  local scratch limit
  scratch="$(mktemp -d)"
  if [ -n "${FUZZ_RUNS:-}" ]; then limit=(-runs="$FUZZ_RUNS"); else limit=(-max_total_time="$seconds"); fi
  echo "sanitize_fuzz: $1 (${FUZZ_RUNS:+$FUZZ_RUNS runs}${FUZZ_RUNS:-${seconds}s}) from $2"
  "$build/tests/fuzz/$1" "${limit[@]}" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$findings/$1-" "$scratch" "$2" < /dev/null 2>&1 | grep -E "^(stat::number_of_executed_units|==|SUMMARY|INFO: Seed)" || true
  rm -rf "$scratch"
  # crash-, timeout-, oom-, leak- files are findings; a slow-unit- file only says the machine was busy.
  local found
  found=$(find "$findings" -name "$1-crash-*" -o -name "$1-timeout-*" -o -name "$1-oom-*" -o -name "$1-leak-*")
  if [ -n "$found" ]; then
    echo "sanitize_fuzz: $1 found inputs that fail: $found" >&2
    return 1
  fi
}
run_fuzzer fuzz_config tests/fuzz/corpus/config
run_fuzzer fuzz_text_trace tests/fuzz/corpus/text_trace
run_fuzzer fuzz_alloc_conf tests/fuzz/corpus/alloc_conf
run_fuzzer fuzz_snapshot tests/data/torch_snapshots/synthetic
echo "sanitize_fuzz: clean"
