#!/usr/bin/env bash
# The recordings that call torch.cuda.empty_cache() replayed on the H200, in one call: builds
# gpumembench and the tests, runs GpuTorchSnapshots (every committed recording on the whole card)
# and `replay --device cuda` of each empty_cache recording (its self-check replays beside it).
#
#   OUT=/some/dir bash scripts/gpu_empty_cache_check.sh      # $OUT/empty_cache.tar.gz
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job empty_cache 400
gpu_build -- gpumembench gmb_tests
log "GpuTorchSnapshots"
guarded build-gpu/tests/gmb_tests --gtest_filter='GpuTorchSnapshots*' > "$WORK/gpu_torch_snapshots.log" 2>&1 || status=1
grep -E '^\[gpu-snapshot\]|OK \]|FAILED|PASSED|SKIPPED' "$WORK/gpu_torch_snapshots.log" | tee -a "$LOG"
for name in snap_empty_cache snap_empty_cache_expandable snap_empty_cache_stream_wait; do
  log "replay on the H200: $name"
  guarded build-gpu/gpumembench replay --device cuda --trace "tests/data/torch_snapshots/$name.pickle.gz" \
    --allocator caching >> "$LOG" 2>&1 || status=1
done
finish
