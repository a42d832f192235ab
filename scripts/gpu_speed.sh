#!/usr/bin/env bash
# The harness's own speed on the GPU machine's 16 cores (scripts/measure_speed.py: the replays run
# on sim; the many cores show what a second thread gives), and the recorded PyTorch snapshots
# replayed on the H200 (GpuTorchSnapshots, in a process of its own), in one call.
#
#   OUT=/some/dir RUNS=11 bash scripts/gpu_speed.sh
#
# Brings back $OUT/speed_gpu.tar.gz: speed_gpu/{run.log,environment.txt,build.log,gpu_tests.log,speed.md}.
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job speed_gpu 540

gpu_build -- gpumembench gmb_tests
log "GPU tests (GpuTorchSnapshots*)"
guarded build-gpu/tests/gmb_tests --gtest_filter='GpuTorchSnapshots*' > "$WORK/gpu_tests.log" 2>&1 || status=1
grep -E '^\[gpu-snapshot\]|OK \]|FAILED|PASSED' "$WORK/gpu_tests.log" | tee -a "$LOG"
pack
log "speed (scripts/measure_speed.py --runs ${RUNS:-11})"
guarded python3 scripts/measure_speed.py --build build-gpu --runs "${RUNS:-11}" --out "$WORK/speed.md" >> "$LOG" 2>&1 || status=1
cat "$WORK/speed.md" 2>/dev/null | tee -a "$LOG"
log "done, status $status"
pack
exit $status
