#!/usr/bin/env bash
# The harness's own speed on the GPU machine's 16 cores (scripts/measure_speed.py: the replays run
# on sim; the many cores show what a second thread gives), and the recorded PyTorch snapshots
# replayed on the H200 (GpuTorchSnapshots, in a process of its own), in one call.
#
#   OUT=/some/dir RUNS=11 bash scripts/gpu_speed.sh
#   OUT=/some/dir STAGE=pages bash scripts/gpu_speed.sh   # the large buffers' pages only: what this
#       machine's sysfs says, and the 120-step replays with GMB_HUGE_PAGES=on against =off, lone
#       (5 s idle before each) and back to back (common/huge_page_allocator.h)
#
# Brings back $OUT/speed_gpu.tar.gz: speed_gpu/{run.log,environment.txt,build.log,gpu_tests.log,speed.md}.
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job speed_gpu 540

if [ "${STAGE:-}" = pages ]; then
  gpu_build -- gpumembench
  log "virtio devices (id, features; a balloon is 0x0005, free page reporting its bit 5)"
  for d in /sys/bus/virtio/devices/*; do
    [ -e "$d/device" ] && echo "$d $(cat "$d/device") $(cat "$d/features" 2>/dev/null)"
  done 2>&1 | tee -a "$LOG"
  echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>&1)" | tee -a "$LOG"
  build-gpu/gpumembench --version | tee -a "$LOG"
  for m in on off; do
    printf '#!/bin/sh\nGMB_HUGE_PAGES=%s exec %s "$@"\n' "$m" "$PWD/build-gpu/gpumembench" > "$WORK/pages_$m"
    chmod +x "$WORK/pages_$m"
  done
  frames=/tmp/gmb_speed_frames_shared.pickle.gz
  long=tests/data/torch_snapshots/snap_speed_120steps.pickle.gz
  python3 scripts/make_frames_snapshot.py "$long" "$frames" --shared-dicts >> "$LOG" 2>&1 || status=1
  for what in "--all-cores --pause 5 10 stacks" "--all-cores 15 stacks" "--pause 5 8 stacks" "--all-cores --pause 5 8 long"; do
    set -- $what
    file=$frames
    [ "${!#}" = long ] && file=$long
    log "ab_time ${what% *}: $file, GMB_HUGE_PAGES=on then off"
    guarded python3 scripts/ab_time.py "${@:1:$#-1}" "$WORK/pages_on" "$WORK/pages_off" -- replay --device sim -q \
      --trace "$file" --allocator caching >> "$LOG" 2>&1 || status=1
    tail -3 "$LOG"
  done
  finish
fi

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
