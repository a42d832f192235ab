#!/usr/bin/env bash
# The one command for the GPU machine (device tool): build, run the GPU tests and the whole
# suite, run configs on the real GPU, and collect everything into $OUT.
#
#   STAGES="build test snapshots configs frontier bench reference torchbench" bash scripts/gpu_run.sh
#   CONFIGS="configs/hole_pattern.yaml ..." (default: every configs/*.yaml)
#   GPU_TEST_FILTER='GpuTorchCaching*' (default Gpu*); GPU_TESTS_ONLY=1 skips the whole CTest suite
#
# Brings back (<= 8 files): gpu_run.log, gpu_results.tar.gz (results/, test and bench
# output), and what the reference stage writes (driver_probe.json, torch_ref.tar.gz, ...).
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
STAGES="${STAGES:-build test configs frontier}"
LOG="$OUT/gpu_run.log"
COLLECT="$(mktemp -d)/gpu"
mkdir -p "$COLLECT/results"
: > "$LOG"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG"; }
# Packs what is collected so far: a run cut off by the device's time limit still brings it back.
pack() { tar -czf "$OUT/gpu_results.tar.gz.tmp" -C "$(dirname "$COLLECT")" gpu && mv "$OUT/gpu_results.tar.gz.tmp" "$OUT/gpu_results.tar.gz"; }
has() { [[ " $STAGES " == *" $1 "* ]]; }
status=0

{
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo none) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
  echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
  echo "tsc flags: $(grep -o -w 'constant_tsc\|nonstop_tsc' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')"
  nvcc --version 2>&1 | tail -2
  cmake --version | head -1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
} 2>&1 | tee -a "$LOG" > "$COLLECT/environment.txt"

if has build; then
  log "build"
  if ! BUILD_DIR=build-gpu scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90 2>&1 | tail -30 | tee -a "$LOG"; then
    log "BUILD FAILED"; status=1
  fi
fi
BIN=build-gpu/gpumembench

if has torchbench && [ -x build-gpu/gpumembench_bench ]; then
  # Ours and PyTorch's C++ allocator in the same run, pinned to the same core (issue 3).
  log "caching allocator speed: ours vs PyTorch"
  taskset -c 2 build-gpu/gpumembench_bench --benchmark_filter=Caching --benchmark_repetitions=5 \
    --benchmark_format=json > "$COLLECT/ours_caching.json" 2> "$COLLECT/ours_caching.log" || status=1
  PYTHONUNBUFFERED=1 timeout 300 python3 scripts/bench_torch_allocator.py --ours "$COLLECT/ours_caching.json" \
    --cpu 2 --out "$COLLECT/caching_speed.json" > "$COLLECT/torch_bench.log" 2>&1 || status=1
  tail -40 "$COLLECT/torch_bench.log" | tee -a "$LOG"
  pack
fi

if has test && [ -x build-gpu/tests/gmb_tests ]; then
  log "GPU tests"
  build-gpu/tests/gmb_tests --gtest_filter="${GPU_TEST_FILTER:-Gpu*}" 2>&1 | tee "$COLLECT/gpu_tests.log" | tee -a "$LOG" | tail -40 || status=1
  if [ "${GPU_TESTS_ONLY:-0}" != 1 ]; then  # GPU_TESTS_ONLY=1: CI runs the rest
    log "whole suite (ctest)"
    (cd build-gpu && ctest --output-on-failure -j8 2>&1) > "$COLLECT/ctest.log" || status=1
    tail -15 "$COLLECT/ctest.log" | tee -a "$LOG"
  fi
  pack
fi

if has configs && [ -x "$BIN" ]; then
  for cfg in ${CONFIGS:-configs/*.yaml}; do
    name=$(basename "$cfg" .yaml)
    log "config $cfg on cuda"
    start=$(date +%s)
    # shellcheck disable=SC2086  # CONFIG_ARGS: extra flags for every config, e.g. "--steps 120 --allocator caching"
    if ! timeout "${CONFIG_TIMEOUT:-240}" "$BIN" --config "$cfg" --device cuda --quiet --format md,csv,json,latex ${CONFIG_ARGS:-} \
        --output "$COLLECT/results/$name" 2>&1 | tee "$COLLECT/results/$name.log" | tee -a "$LOG"; then
      log "config $cfg FAILED"; status=1
    fi
    log "config $cfg took $(( $(date +%s) - start )) s"
    if [ -f "$COLLECT/results/$name/results.json" ]; then
      python3 scripts/harness_overhead.py "$COLLECT/results/$name/results.json" > "$COLLECT/results/$name/harness_overhead.md" 2>&1
      tail -1 "$COLLECT/results/$name/harness_overhead.md" | tee -a "$LOG"
    fi
    pack
  done
fi

# Real PyTorch snapshots (tests/data/torch_snapshots/) replayed on the GPU through `caching`
# with their own settings: the replay's figures and its self-check against the recording.
if has snapshots && [ -x "$BIN" ]; then
  mkdir -p "$COLLECT/results/snapshots"
  for snap in ${SNAPSHOTS:-tests/data/torch_snapshots/snap_*.pickle.gz}; do
    name=$(basename "$snap" .pickle.gz)
    log "replay $snap on cuda"
    timeout "${CONFIG_TIMEOUT:-240}" "$BIN" replay --trace "$snap" --allocator caching --device cuda \
      > "$COLLECT/results/snapshots/$name.log" 2>&1 || { log "replay $snap exit $?"; status=1; }
    grep -i -E "reproduces|peak reserved|differs" "$COLLECT/results/snapshots/$name.log" | head -3 | tee -a "$LOG"
  done
  pack
fi

# OOM frontiers: every config with a `frontier:` section (or FRONTIER_CONFIGS), on the GPU.
if has frontier && [ -x "$BIN" ]; then
  for cfg in ${FRONTIER_CONFIGS:-$(grep -l '^frontier:' configs/*.yaml)}; do
    name=$(basename "$cfg" .yaml)
    log "frontier $cfg on cuda"
    start=$(date +%s)
    if ! timeout "${CONFIG_TIMEOUT:-240}" "$BIN" frontier --config "$cfg" --device cuda --quiet \
        --output "$COLLECT/results/${name}_frontier" 2>&1 | tee "$COLLECT/results/${name}_frontier.log" | tee -a "$LOG"; then
      log "frontier $cfg FAILED"; status=1
    fi
    log "frontier $cfg took $(( $(date +%s) - start )) s"
  done
fi

if has bench && [ -x build-gpu/gpumembench_bench ]; then
  log "benchmarks"
  build-gpu/gpumembench_bench ${BENCH_ARGS:-} --benchmark_format=console --benchmark_out="$COLLECT/bench.json" \
    --benchmark_out_format=json 2>&1 | tee "$COLLECT/bench.log" | tail -60 | tee -a "$LOG" || status=1
fi


# Real PyTorch on the fragmentation-OOM trace: does torch itself OOM where `caching` does?
if has fragoomref && [ -d configs/traces/fragmentation_oom ]; then
  log "PyTorch on configs/traces/fragmentation_oom"
  PYTHONUNBUFFERED=1 timeout 240 python3 scripts/torch_reference.py --traces configs/traces/fragmentation_oom \
    --out "$COLLECT/torch_fragoom" 2>&1 | tail -20 | tee -a "$LOG" || status=1
fi

if has reference; then
  log "PyTorch reference + driver probe"
  OUT="$OUT" bash scripts/gpu_reference.sh 2>&1 | tail -20 | tee -a "$LOG" || status=1
fi

pack
log "done, status $status"
exit $status
