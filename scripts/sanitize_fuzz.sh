#!/usr/bin/env bash
# The sanitizer and fuzzing pass (GMB_SANITIZE_FUZZ=1 scripts/test.sh, or alone): a clang build of everything with
# AddressSanitizer + UndefinedBehaviorSanitizer (any report fails) and libFuzzer coverage into
# build-san/, then
#   1. the unit tests under the sanitizers (GMB_SAN_TESTS): all but the GPU tests and the long
#      fidelity replays against recorded PyTorch runs (TransformerCalibration, TorchSnapshots,
#      CachingFidelity), which take most of the suite's time and run unsanitized in CTest;
#   2. each libFuzzer target for FUZZ_SECONDS (default 15; four targets: about a minute),
#      from its corpus in tests/fuzz/corpus (new inputs go to a scratch copy, not the repository).
# A finding leaves its input in build-san/fuzz-findings/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${SAN_BUILD_DIR:-build-san}"
seconds="${FUZZ_SECONDS:-15}"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
[ -f "$build/CMakeCache.txt" ] && gen=()
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DGMB_BUILD_FUZZ=ON -DGMB_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target gmb_tests gpumembench fuzz_config fuzz_text_trace fuzz_alloc_conf fuzz_snapshot

# No GPU here; where there is one, the CUDA runtime needs the shadow gap unprotected.
export ASAN_OPTIONS="${ASAN_OPTIONS:-protect_shadow_gap=0:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
tests="${GMB_SAN_TESTS:--Gpu*:TransformerCalibration.*:TorchSnapshots.*:CachingFidelity.*}"
echo "sanitize_fuzz: unit tests under ASan+UBSan ($tests)"
"$build/tests/gmb_tests" --gtest_filter="$tests" --gtest_brief=1

findings="$build/fuzz-findings"
mkdir -p "$findings"
run_fuzzer() {  # target corpus-dir
  local scratch
  scratch="$(mktemp -d)"
  echo "sanitize_fuzz: $1 for ${seconds}s from $2"
  "$build/tests/fuzz/$1" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
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
