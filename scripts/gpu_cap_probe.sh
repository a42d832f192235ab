#!/usr/bin/env bash
# Two questions for the sim's models at a memory cap (issue 14), in one call of about 4 minutes:
#
#     bash scripts/gpu_cap_probe.sh        # from the repository root; OUT=DIR for the output
#
# 1. scripts/probe/cap_probe.cu: does a cudaMemPool with no device memory left serve a request
#    from the free pages inside granules that still hold live blocks (pool_cap.csv)? Do cudaMalloc
#    and cudaFree of large blocks cost more when the device is nearly full (free_cost.csv)?
# 2. configs/dynamic_seq.yaml through caching[max_split_size_mb:128] (the run the step-time
#    model puts at 2x the H200's steps/s) and caching, with every cudaMalloc / cudaFree timed
#    (GMB_CUDA_CALL_LOG), once as it runs and once with a synchronize before each call (the
#    calls' own cost); and through cuda_mempool with every cudaMallocFromPoolAsync timed.
# 3. (PARTS=pool) configs/dynamic_seq.yaml and fixed_seq_eager.yaml through cuda_mempool with every
#    pool call logged with its pointer and the pool's reserved bytes: where the H200's pool put
#    each block while kernels ran (the sim's pool model OOMs on both at the 24 GiB cap; the H200
#    has not).
# 4. (PARTS=timeline) the same two configs through cuda_mempool and dynamic_seq through caching,
#    120 steps each, with a `launch` row in the log after every compute op: when the host
#    launched each kernel and how far the GPU was behind it (where the host stalls and the GPU
#    catches up), for the sim's model of how far its host runs ahead.
# 5. (PARTS=delay) the same two configs through cuda_mempool, unlogged, with 0 (twice), 2, 5
#    and 10 us of host work before each pool call (GMB_CUDA_POOL_CALL_DELAY_US): how the pool's
#    peak and OOMs at the cap move with how far the host runs ahead of the GPU.
#    (PARTS=delay_eager) the same for dynamic_seq_eager.yaml at 0 (twice) and 5 us.
# 6. (PARTS=band) the four transformer configs at their 24 GiB cap through both cuda_mempool rows,
#    unlogged, three runs each (BAND_RUNS): the H200's own run-to-run band, against which the
#    sim's pool at a cap is judged.
# 7. (PARTS=early) the first steps of fixed_seq (3) and fixed_seq_eager (4) through cuda_mempool,
#    where each run's pool reaches its peak, with every pool call and launch logged; and
#    tests/data/torch_snapshots/snap_two_streams replayed through cuda_mempool, logged: where the
#    sim's pool parts from the H200's on the fixed-length configs and on two streams.
# 8. (PARTS=trim) fixed_seq_eager through cuda_mempool[trim_every_steps=100], 102 steps, every pool
#    call logged (the H200's trimmed pool OOMs at step 101 in 5 of 6 runs, the sim's not), and
#    the same unlogged. (PARTS=trim_order) unlogged: the trimmed row alone for 300 steps, and
#    both rows in one process (the untrimmed first, as `--allocator cuda_mempool` runs them) for
#    102 steps, twice: does the trimmed row's OOM depend on the case before it in the process?
# PARTS (default "probe calls") picks the parts: probe, calls, pool, timeline, delay, delay_eager,
# band, early, trim, trim_order.
# Brings back $OUT/cap_probe.tar.gz (unpacks to cap_probe/); rewritten after every step.
set -u
cd "$(dirname "$0")/.." || exit 1
source scripts/gpu_lib.sh
gpu_job cap_probe 420
PARTS="${PARTS:-probe calls}"
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

if part probe; then
log "cap_probe"
mkdir -p "$WORK/probe"
if nvcc -O2 -std=c++17 -o "$WORK/../cap_probe_bin" scripts/probe/cap_probe.cu >> "$LOG" 2>&1; then
  guarded "$WORK/../cap_probe_bin" pool_cap "$WORK/probe" 2>> "$LOG" || { log "pool_cap failed"; status=1; }
  pack
  guarded "$WORK/../cap_probe_bin" free_cost "$WORK/probe" 2>> "$LOG" || { log "free_cost failed"; status=1; }
  gzip -f "$WORK/probe/free_cost.csv" 2>/dev/null
else
  log "cap_probe build FAILED"; status=1
fi
pack
fi

gpu_build -- gpumembench
calls() {  # name, sync (0/1), allocator label[, config[, steps]]
  local name=$1 sync=$2 alloc=$3 config=${4:-dynamic_seq} steps=()
  [ -n "${5:-}" ] && steps=(--steps "$5")
  mkdir -p "$WORK/$name"
  log "$config $alloc (sync before calls: $sync)"
  guarded env GMB_CUDA_CALL_LOG="$WORK/$name/calls.csv" GMB_CUDA_CALL_LOG_SYNC=$sync \
      build-gpu/gpumembench --config "configs/$config.yaml" --device cuda --allocator "$alloc" \
      "${steps[@]}" --quiet --format md,json --output "$WORK/$name/out" > "$WORK/$name/run.log" 2>&1
  log "exit $?"
  grep -E '^\| ' "$WORK/$name/out/results.md" 2>/dev/null | head -4 | cut -c1-200 | tee -a "$LOG"
  gzip -f "$WORK/$name"/calls.csv.* 2>/dev/null
  if [ "${LOGS_APART:-0}" = 1 ]; then  # big logs come back as files of their own (16 MiB each at most)
    for f in "$WORK/$name"/calls.csv.*.gz; do [ -f "$f" ] && mv "$f" "$OUT/${name}_$(basename "$f")"; done
  fi
  pack
}
if part calls; then
  calls maxsplit 0 'caching[max_split_size_mb:128]'
  calls maxsplit_sync 1 'caching[max_split_size_mb:128]'
  calls caching 0 caching
  calls mempool 0 cuda_mempool
fi
if part pool; then
  LOGS_APART=1
  calls pool_dynamic 0 cuda_mempool
  calls pool_fixed_eager 0 cuda_mempool fixed_seq_eager
fi
if part timeline; then
  LOGS_APART=1
  calls timeline_pool_dynamic 0 cuda_mempool dynamic_seq 120
  calls timeline_pool_fixed_eager 0 cuda_mempool fixed_seq_eager 120
  calls timeline_caching_dynamic 0 caching dynamic_seq 120
fi
if part delay || part delay_eager; then
  delays="0 0b 2 5 10" configs="fixed_seq_eager dynamic_seq"
  part delay_eager && delays="0 0b 5" configs="dynamic_seq_eager"
  for d in $delays; do
    for config in $configs; do
      name="delay_${config}_$d"
      mkdir -p "$WORK/$name"
      log "$config cuda_mempool, GMB_CUDA_POOL_CALL_DELAY_US=${d%b}"
      guarded env GMB_CUDA_POOL_CALL_DELAY_US="${d%b}" build-gpu/gpumembench --config "configs/$config.yaml" \
          --device cuda --allocator cuda_mempool --quiet --format md,json --output "$WORK/$name/out" \
          > "$WORK/$name/run.log" 2>&1
      log "exit $?"
      grep -E '^\| cuda_mempool' "$WORK/$name/out/results.md" 2>/dev/null | head -2 | cut -c1-220 | tee -a "$LOG"
      pack
    done
  done
fi
if part early; then
  LOGS_APART=1
  calls early_fixed 0 cuda_mempool fixed_seq 3
  calls early_fixed_eager 0 cuda_mempool fixed_seq_eager 4
  name=early_two_streams
  mkdir -p "$WORK/$name"
  log "snap_two_streams through cuda_mempool, logged"
  guarded env GMB_CUDA_CALL_LOG="$WORK/$name/calls.csv" build-gpu/gpumembench replay \
      --trace tests/data/torch_snapshots/snap_two_streams.pickle.gz --allocator cuda_mempool --device cuda \
      --quiet --format md,json --output "$WORK/$name/out" > "$WORK/$name/run.log" 2>&1
  log "exit $?"
  gzip -f "$WORK/$name"/calls.csv.* 2>/dev/null
  for f in "$WORK/$name"/calls.csv.*.gz; do [ -f "$f" ] && mv "$f" "$OUT/${name}_$(basename "$f")"; done
  pack
fi
if part trim; then
  LOGS_APART=1
  calls trim_fixed_eager 0 'cuda_mempool[trim_every_steps=100]' fixed_seq_eager 102
  name=trim_fixed_eager_unlogged
  mkdir -p "$WORK/$name"
  log "fixed_seq_eager cuda_mempool[trim_every_steps=100], unlogged"
  guarded build-gpu/gpumembench --config configs/fixed_seq_eager.yaml --device cuda \
      --allocator 'cuda_mempool[trim_every_steps=100]' --steps 102 --quiet --format md,json \
      --output "$WORK/$name/out" > "$WORK/$name/run.log" 2>&1
  log "exit $?"
  grep -E '^\| cuda_mempool' "$WORK/$name/out/results.md" 2>/dev/null | head -1 | cut -c1-220 | tee -a "$LOG"
  pack
fi
if part trim_order; then
  run_unlogged() {  # name, allocator, steps
    mkdir -p "$WORK/$1"
    log "fixed_seq_eager $2, $3 steps, unlogged"
    guarded build-gpu/gpumembench --config configs/fixed_seq_eager.yaml --device cuda --allocator "$2" \
        --steps "$3" --quiet --format md,json --output "$WORK/$1/out" > "$WORK/$1/run.log" 2>&1
    log "exit $?"
    grep -E '^\| cuda_mempool' "$WORK/$1/out/results.md" 2>/dev/null | head -2 | cut -c1-220 | tee -a "$LOG"
    pack
  }
  run_unlogged trim_alone_300 'cuda_mempool[trim_every_steps=100]' 300
  run_unlogged both_rows_102_a cuda_mempool 102
  run_unlogged both_rows_102_b cuda_mempool 102
fi
if part band; then
  for r in $(seq 1 "${BAND_RUNS:-3}"); do
    for config in fixed_seq_eager dynamic_seq dynamic_seq_eager fixed_seq; do
      name="band_${config}_r$r"
      mkdir -p "$WORK/$name"
      log "$config cuda_mempool, run $r"
      guarded build-gpu/gpumembench --config "configs/$config.yaml" --device cuda --allocator cuda_mempool \
          --quiet --format md,json --output "$WORK/$name/out" > "$WORK/$name/run.log" 2>&1
      log "exit $?"
      grep -E '^\| cuda_mempool' "$WORK/$name/out/results.md" 2>/dev/null | head -2 | cut -c1-220 | tee -a "$LOG"
      pack
    done
  done
fi
log "done, status $status"
pack
exit $status
