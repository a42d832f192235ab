#!/usr/bin/env bash
# Records real PyTorch snapshots on the GPU (scripts/record_torch_training.py) and writes what
# PyTorch reported for them in the form of tests/data/torch_snapshots/expected.json.
#
#   OUT=/some/dir ONLY=snap_stream_wait bash scripts/gpu_record_snapshots.sh   # $OUT/record.tar.gz
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job record 420
ONLY=${ONLY:-snap_stream_wait}
log "record $ONLY ($(python3 -c 'import torch; print(torch.__version__)' 2>&1))"
guarded python3 scripts/record_torch_training.py --out "$WORK/rec" --only "$ONLY" >> "$LOG" 2>&1 || status=1
python3 scripts/torch_snapshot_expected.py "$WORK/rec" > "$WORK/expected_part.json" 2>> "$LOG" || status=1
cat "$WORK/expected_part.json" >> "$LOG"
log "done, status $status"
pack
exit $status
