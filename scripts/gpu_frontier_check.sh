#!/usr/bin/env bash
# Checks a snapshot's OOM frontier against real PyTorch on the GPU machine, in one call:
#   1. runs snap_default's program (record_torch_training.py --group frontier) under memory
#      fractions on both sides of the frontiers `gpumembench frontier` finds for it (and inside
#      the band above the default settings' frontier where it predicts an OOM again), with
#      PyTorch's memory_stats for each (expected.json form) and its snapshot;
#   2. builds gpumembench and the tests, replays every committed recording on the H200
#      (GpuTorchSnapshots), and replays snap_default on the H200 at each of those capacities.
#
#   3. (STAGE=card, after the above) on the H200: the same replays under the allocator's limit
#      (--memory-limit, PyTorch's fraction on the whole card), and the smallest card (--capacity:
#      a ballast leaves only that much) each setting runs on, 2 MiB at a time up from the frontier.
#
#   OUT=/some/dir [STAGE=card] bash scripts/gpu_frontier_check.sh      # $OUT/frontier.tar.gz
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job frontier 560
if [ "${STAGE:-}" = card ]; then
  gpu_build -- gpumembench
  T=configs/traces/snapshots/gpt_dynamic_lengths.pickle.gz
  for point in 18150 18152 18632 18700 expandable_segments:True@17288 expandable_segments:True@17290; do
    conf=""; mib=$point
    case "$point" in *@*) conf=${point%@*}; mib=${point#*@} ;; esac
    log "replay on the H200 under a limit of ${mib} MiB ${conf:-(default settings)}"
    guarded build-gpu/gpumembench replay --device cuda -q --trace "$T" --allocator caching \
      --memory-limit "$((mib * 1048576))" ${conf:+--alloc-conf "$conf"} >> "$LOG" 2>&1 || status=1
  done
  pack
  for start in 18152 expandable_segments:True@17290; do
    conf=""; mib=$start
    case "$start" in *@*) conf=${start%@*}; mib=${start#*@} ;; esac
    for _ in $(seq 1 40); do
      out=$(guarded build-gpu/gpumembench replay --device cuda -q --trace "$T" --allocator caching \
        --capacity "${mib}MiB" ${conf:+--alloc-conf "$conf"} 2>&1)
      row=$(echo "$out" | grep -m1 '^| caching')
      log "card of ${mib} MiB ${conf:-(default settings)}: $row"
      echo "$row" | grep -q '| none |' && break
      mib=$((mib + 2))
    done
  done
  finish
fi
log "record ($(python3 -c 'import torch; print(torch.__version__)' 2>&1))"
guarded python3 scripts/record_torch_training.py --out "$WORK/rec" --group frontier >> "$LOG" 2>&1 || status=1
python3 scripts/torch_snapshot_expected.py "$WORK/rec" > "$WORK/expected_frontier.json" 2>> "$LOG" || status=1
pack
gpu_build -- gpumembench gmb_tests
log "GpuTorchSnapshots"
guarded build-gpu/tests/gmb_tests --gtest_filter='GpuTorchSnapshots*' > "$WORK/gpu_torch_snapshots.log" 2>&1 || status=1
grep -E '^\[gpu-snapshot\]|OK \]|FAILED|PASSED|SKIPPED' "$WORK/gpu_torch_snapshots.log" | tee -a "$LOG"
pack
T=configs/traces/snapshots/gpt_dynamic_lengths.pickle.gz
for point in 18150 18152 18632 18700 expandable_segments:True@17288 expandable_segments:True@17290; do
  conf=""; mib=$point
  case "$point" in *@*) conf=${point%@*}; mib=${point#*@} ;; esac
  log "replay on the H200 at ${mib} MiB ${conf:-(default settings)}"
  guarded build-gpu/gpumembench replay --device cuda -q --trace "$T" --allocator caching --capacity "${mib}MiB" \
    ${conf:+--alloc-conf "$conf"} >> "$LOG" 2>&1 || status=1
done
finish
