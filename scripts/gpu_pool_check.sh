#!/usr/bin/env bash
# The cudaMemPool model on the H200 (issue 14), in one command of about 3 minutes:
#
#     bash scripts/gpu_pool_check.sh        # from the repository root; OUT=DIR for the output
#
# Builds gpumembench and the tests into build-gpu/ once, then runs the GpuNative tests (the
# pool and cudaMalloc models against the driver), and the runs whose run-to-run band the model
# is judged against: dynamic_seq (300 steps) through cuda_mempool twice, and fixed_seq_eager
# through cuda_mempool once (the pool at its 24 GiB cap; the sim's model OOMs on both).
# Brings back $OUT/pool_check.tar.gz (unpacks to pool_check/) and $OUT/pool_check.log; each
# run is skipped once DEADLINE_S (default 300) seconds have passed, and the tar is rewritten
# after every step. Exit status 0 when every step ran and succeeded.
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH="$PATH:/usr/local/cuda/bin"
OUT="${OUT:-$PWD/pool_check_out}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ROOT=$(mktemp -d)
W="$ROOT/pool_check"
mkdir -p "$W"
LOG="$W/pool_check.log"
T0=$(date +%s)
DEADLINE_S="${DEADLINE_S:-300}"
status=0
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }
pack() {
  cp "$LOG" "$OUT/pool_check.log"
  tar -czf "$OUT/pool_check.tar.gz.tmp" -C "$ROOT" pool_check && mv "$OUT/pool_check.tar.gz.tmp" "$OUT/pool_check.tar.gz"
}
time_left() { [ $(( $(date +%s) - T0 )) -lt "$DEADLINE_S" ]; }
{
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo none) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
} >> "$LOG" 2>&1

log "build into build-gpu"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 > "$W/build.log" 2>&1 &&
  timeout 300 cmake --build build-gpu --target gpumembench gmb_tests -j"$(nproc)" >> "$W/build.log" 2>&1
rc=$?
log "build exit $rc"
if [ "$rc" -ne 0 ]; then tail -30 "$W/build.log" | tee -a "$LOG"; pack; exit 1; fi

log "GpuNative tests"
timeout 120 build-gpu/tests/gmb_tests --gtest_filter='GpuNative.*:NativeModel.*' > "$W/gpu_native.log" 2>&1 || status=1
grep -E '^\[(gpu-native|native-model)\]|^\[ *(OK|FAILED) ' "$W/gpu_native.log" | tee -a "$LOG"
pack

run() {  # name, then gpumembench arguments
  local name=$1; shift
  time_left || { log "skipped $name (deadline)"; status=1; return; }
  timeout 120 build-gpu/gpumembench "$@" --device cuda --allocator cuda_mempool --quiet \
    --output "$W/$name" > "$W/$name.log" 2>&1
  local rc=$?
  log "$name: exit $rc"
  grep -E '^\| cuda_mempool ' "$W/$name/results.md" 2>/dev/null | head -2 | cut -c1-240 | tee -a "$LOG"
  [ "$rc" -le 1 ] || status=1
  pack
}
for r in 1 2; do run "dynamic_seq_r$r" --config configs/dynamic_seq.yaml; done
run fixed_seq_eager_r1 --config configs/fixed_seq_eager.yaml
log "done, status $status"
pack
exit "$status"
