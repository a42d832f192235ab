#!/usr/bin/env bash
# Requests of 0 bytes on the real driver: what each allocation call returns for them
# (scripts/probe/zero_byte_probe.cu), and a trace holding them replayed through every allocator
# on the GPU and on sim (the device calls each counts must agree).
#
#   OUT=/some/dir bash scripts/gpu_zero_byte.sh     # brings back $OUT/zero_byte.tar.gz
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job zero_byte 300
gpu_build -- gpumembench
B=build-gpu/gpumembench
log "zero_byte_probe"
if nvcc -O2 -std=c++17 -o "$WORK/../zero_byte_probe" scripts/probe/zero_byte_probe.cu >> "$LOG" 2>&1; then
  guarded "$WORK/../zero_byte_probe" > "$WORK/probe.csv" 2>> "$LOG" || { log "probe failed"; status=1; }
  cat "$WORK/probe.csv" >> "$LOG"
else
  log "probe build FAILED"; status=1
fi
printf 'action,id,bytes\nalloc,0,0\nalloc,1,0\nalloc,2,100\nfree,0,\nfree,1,\nfree,2,\nalloc,3,0\nfree,3,\n' > "$WORK/zero.csv"
for dev in cuda sim; do
  for a in cuda_malloc cuda_managed cuda_mempool caching bfc vmm_stitch ideal; do
    log "\$ replay --device $dev --allocator $a"
    guarded $B replay --device $dev --trace "$WORK/zero.csv" --allocator $a -q --output "$WORK/$dev-$a" \
      --format json,md >> "$LOG" 2>&1
    log "exit $?"
  done
done
pack
log "done, status $status"
pack
exit $status
