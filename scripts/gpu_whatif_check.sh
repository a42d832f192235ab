#!/usr/bin/env bash
# Checks a snapshot's what-if against real PyTorch on the GPU machine, in one call:
#   1. records snap_stream_retry8_25g again (run to run, PyTorch's figures must not move) and the
#      same run under the settings a replay of it predicts for (record_torch_training.py --group
#      whatif), with PyTorch's memory_stats for each (expected.json form);
#   2. runs every committed OOM reproducer in real PyTorch (scripts/gpu_reproducers.sh);
#   3. builds gpumembench and the tests, replays every committed recording on the H200
#      (GpuTorchSnapshots) and the recorded run's what-ifs on the H200 (`replay --device cuda`).
#
#   OUT=/some/dir bash scripts/gpu_whatif_check.sh      # $OUT/whatif.tar.gz
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job whatif 560
log "record ($(python3 -c 'import torch; print(torch.__version__)' 2>&1))"
guarded python3 scripts/record_torch_training.py --out "$WORK/rec" \
  --only snap_stream_retry8_25g,snap_stream_retry8_25g_expandable,snap_stream_retry8_25g_max_split128,snap_stream_retry8_25g_gc06,snap_stream_retry8_25g_roundup4 \
  >> "$LOG" 2>&1 || status=1
python3 scripts/torch_snapshot_expected.py "$WORK/rec" > "$WORK/expected_whatif.json" 2>> "$LOG" || status=1
pack
log "reproducers"
OUT="$WORK" guarded bash scripts/gpu_reproducers.sh >> "$LOG" 2>&1 || status=1
pack
gpu_build -- gpumembench gmb_tests
log "GpuTorchSnapshots"
guarded build-gpu/tests/gmb_tests --gtest_filter='GpuTorchSnapshots*' > "$WORK/gpu_torch_snapshots.log" 2>&1 || status=1
grep -E '^\[gpu-snapshot\]|OK \]|FAILED|PASSED|SKIPPED' "$WORK/gpu_torch_snapshots.log" | tee -a "$LOG"
T=tests/data/torch_snapshots/snap_stream_retry8_25g.pickle.gz
for conf in "" expandable_segments:True max_split_size_mb:128 garbage_collection_threshold:0.6 roundup_power2_divisions:4; do
  log "what-if on the H200: ${conf:-own settings}"
  guarded build-gpu/gpumembench replay --device cuda --trace "$T" --allocator caching --memory-limit 8858370048 \
    ${conf:+--alloc-conf "$conf"} >> "$LOG" 2>&1 || status=1
done
finish
