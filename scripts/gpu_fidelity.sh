#!/usr/bin/env bash
# Fidelity measurements on the GPU machine (issue 14), in one command of about 7 minutes:
#
#     bash scripts/gpu_fidelity.sh          # from the repository root; OUT=DIR for the output
#
# 1. builds gpumembench and the tests into build-gpu/ in the background, meanwhile
# 2. scripts/probe/pool_probe.cu: the cudaMemPool's rules (growth, reuse, coalescing, trims),
#    the GpuNative random mixes through the pool op by op (3 repeats in one process, a variant
#    synchronized after every free, longer mixes) and through cudaMalloc (one fresh process
#    per seed, twice: is the driver deterministic?)                      -> probe/
# 3. the reference traces whose cases use expandable segments under a memory cap, replayed
#    through real PyTorch (scripts/torch_reference.py, the tests/data/torch_ref format, with
#    PyTorch's own trace of every page mapped and unmapped: <case>.history.json.gz)  -> ref/
# 4. once the build is there: the two GpuNative model tests with per-op dumps (twice), the
#    real snapshots through cuda_mempool with timelines, dynamic_seq through cuda_mempool
#    (twice, 150 steps: the pool's growth with real kernels)     -> native/, replay/, dyn/
#
# Brings back $OUT/fidelity.tar.gz (everything above, unpacked as fidelity/) and
# $OUT/gpu_fidelity.log. Each stage is skipped once the run passes DEADLINE_S (default 430)
# seconds, and the tar is rewritten after every stage, so a run cut short still brings back
# what it has. Exit status: 0 when every stage ran and succeeded, 1 otherwise.
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH="$PATH:/usr/local/cuda/bin"
OUT="${OUT:-$PWD/fidelity_out}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ROOT=$(mktemp -d)
W="$ROOT/fidelity"
mkdir -p "$W"/{probe,ref,native,replay,dyn}
LOG="$W/gpu_fidelity.log"
T0=$(date +%s)
DEADLINE_S="${DEADLINE_S:-430}"
status=0
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*" | tee -a "$LOG"; }
pack() {
  cp "$LOG" "$OUT/gpu_fidelity.log"
  tar -czf "$OUT/fidelity.tar.gz.tmp" -C "$ROOT" fidelity && mv "$OUT/fidelity.tar.gz.tmp" "$OUT/fidelity.tar.gz"
}
time_left() { [ $(( $(date +%s) - T0 )) -lt "$DEADLINE_S" ]; }

{
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo none) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
} >> "$LOG" 2>&1

# 1. build in the background
log "build (background) into build-gpu"
( BUILD_DIR=build-gpu timeout 320 scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90 > "$W/build.log" 2>&1
  echo $? > "$W/build.rc" ) &
BUILD_PID=$!

# 2. pool and cudaMalloc probes
log "pool_probe"
if nvcc -O2 -std=c++17 -o "$ROOT/pool_probe" scripts/probe/pool_probe.cu >> "$LOG" 2>&1; then
  timeout 60 "$ROOT/pool_probe" pool_rules "$W/probe" 2>> "$LOG" || { log "pool_rules failed"; status=1; }
  timeout 120 "$ROOT/pool_probe" pool_mix "$W/probe" 1,2,3,4,5,6 3 2>> "$LOG" || { log "pool_mix failed"; status=1; }
  for rep in a b; do
    for seed in 1 2 3; do
      timeout 30 "$ROOT/pool_probe" malloc_mix "$W/probe" "$seed" "$rep" 2>> "$LOG" || { log "malloc_mix $seed failed"; status=1; }
    done
  done
else
  log "pool_probe build FAILED"; status=1
fi
pack

# 3. PyTorch on the expandable-segment cases under a cap
log "PyTorch reference: expandable segments under a cap"
if python3 scripts/gen_reference_traces.py "$W/traces" >> "$LOG" 2>&1; then
  PYTHONUNBUFFERED=1 timeout 200 python3 scripts/torch_reference.py --traces "$W/traces" --out "$W/ref" \
    --only es__es_,esrp2__,esgc08__,esms64__ --budget-s 150 --history >> "$LOG" 2>&1 || { log "torch_reference failed"; status=1; }
  tail -25 "$LOG" | grep -E "events|done|!!" | tail -22
else
  log "trace generation FAILED"; status=1
fi
pack

# 4. with the build: GpuNative per-op dumps, cuda_mempool on snapshots and dynamic_seq
log "waiting for the build"
wait "$BUILD_PID"
log "build exit $(cat "$W/build.rc" 2>/dev/null || echo '?')"
tail -5 "$W/build.log" >> "$LOG"
if [ -x build-gpu/tests/gmb_tests ] && [ -x build-gpu/gpumembench ]; then
  for rep in 1 2; do
    mkdir -p "$W/native/r$rep"
    for t in GpuNative.MemPoolModelMatchesTheGpuOnSeededRandomMixes GpuNative.CudaMallocPlacementModelMatchesTheGpu; do
      time_left || break
      GMB_GPU_NATIVE_DUMP="$W/native/r$rep" timeout 90 build-gpu/tests/gmb_tests --gtest_filter="$t" \
        > "$W/native/r$rep/$t.log" 2>&1
      log "$t (run $rep): exit $? $(grep -c '\[gpu-native\]' "$W/native/r$rep/$t.log") lines"
    done
  done
  pack
  for snap in tests/data/torch_snapshots/snap_{default,two_streams,oom_cap16g,max_split128}.pickle.gz; do
    time_left || break
    name=$(basename "$snap" .pickle.gz)
    timeout 60 build-gpu/gpumembench replay --trace "$snap" --allocator cuda_mempool --device cuda --quiet \
      --format json --timeline "$W/replay/$name.timeline.csv" --output "$W/replay/$name" > "$W/replay/$name.log" 2>&1
    log "replay $name through cuda_mempool on cuda: exit $?"
  done
  pack
  for rep in 1 2; do
    time_left || break
    timeout 70 build-gpu/gpumembench --config configs/dynamic_seq.yaml --device cuda --allocator cuda_mempool \
      --steps 150 --quiet --format json,md --output "$W/dyn/r$rep" > "$W/dyn/r$rep.log" 2>&1
    log "dynamic_seq cuda_mempool run $rep: exit $?"
  done
else
  log "no build: stage 4 skipped"; status=1
fi
log "done, status $status"
pack
exit $status
