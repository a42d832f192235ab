#!/usr/bin/env bash
# The replay command's GPU path in one call: builds gpumembench and replays recorded PyTorch
# snapshots on the real device (--device cuda) with the self-check, an export of the what-if, an
# RMM log read back, and a trace past the caching model's limit (exit 1, no file left).
#
#   OUT=/some/dir bash scripts/gpu_replay_check.sh     # brings back $OUT/replay_check.tar.gz
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job replay_check 420
gpu_build -- gpumembench
B=build-gpu/gpumembench
S=tests/data/torch_snapshots
run() {  # a command, its output and its exit status in the log
  log "\$ $*"
  guarded "$@" >> "$LOG" 2>&1
  log "exit $?"
}
run $B replay --device cuda --trace $S/snap_oom_cap16g_expandable.pickle.gz --allocator caching --capacity 16GiB \
  --export-snapshot "$WORK/e.pickle" --export-rmm-log "$WORK/e.csv"
run $B replay --device sim --trace "$WORK/e.pickle" --allocator caching --capacity 16GiB
run $B replay --device cuda --trace "$WORK/e.csv" --allocator caching --alloc-conf expandable_segments:True --capacity 16GiB
run $B replay --device cuda --trace $S/snap_default.pickle.gz --allocator caching
# Frees that wait on another stream (record_stream): the free requests replayed on the card, the
# export read back on sim with the same peaks.
run $B replay --device cuda --trace $S/snap_stream_wait.pickle.gz --allocator caching --export-snapshot "$WORK/w.pickle"
run $B replay --device sim --trace "$WORK/w.pickle" --allocator caching
rm -f "$WORK/w.pickle"
# A request that fails until a block waiting on another stream is taken back (PyTorch waits for it).
run $B replay --device cuda --trace $S/synthetic/taken_back.pickle --allocator caching --capacity 1600MiB
python3 -c "print('action,id,bytes,stream'); [print(f'alloc,{i},512,{i}') for i in range(1025)]" > "$WORK/s.csv"
run $B replay --device cuda -q --trace "$WORK/s.csv" --allocator caching --export-rmm-log "$WORK/o.csv" --timeline "$WORK/t.csv"
log "left behind: $(ls "$WORK"/o.csv* "$WORK"/t.csv 2>/dev/null | wc -l) files"
rm -f "$WORK/e.pickle" "$WORK/e.csv" "$WORK/s.csv"
pack
log "done, status $status"
pack
exit $status
