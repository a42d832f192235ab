#!/usr/bin/env bash
# vmm_stitch (issue 15) on the GPU machine (device tool; no internet there): builds gpumembench
# and the tests, times the driver's virtual memory calls one by one (scripts/probe/vmm_probe.cu),
# runs the GpuVmm* tests, then configs/allocators.yaml for vmm_stitch and caching on the GPU and
# on sim from the same build, and packs everything into one tar. Every step runs under what is
# left of a deadline (default 300 s), and the tar is rewritten after each step, so a run cut short
# still brings back what it finished.
#
#   OUT=/some/dir bash scripts/gpu_vmm.sh          # default OUT: ./gpu_out
#   DEADLINE_S=300 STEPS=100                       # the defaults
#   PROBE=0 CONFIGS=0                              # skip the probe / the allocators.yaml runs
#                                                  # (a tests-only call: build and GpuVmm*)
#
# Brings back $OUT/vmm_gpu.tar.gz: vmm_gpu/{run.log,environment.txt,build.log,vmm_probe.json,
# gpu_tests.log,allocators_{cuda,sim}/} (each a results folder: results.md/csv/json, cases/).
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job vmm_gpu 300
STEPS="${STEPS:-100}"

# The probe first: it is small, and its figures are what the sim's model of these calls needs.
if [ "${PROBE:-1}" = 0 ]; then
  log "vmm_probe skipped (PROBE=0)"
else
  log "vmm_probe (build and run)"
  if guarded nvcc -O2 -std=c++17 -o "$WORK/vmm_probe" scripts/probe/vmm_probe.cu -lcuda >> "$LOG" 2>&1; then
    guarded "$WORK/vmm_probe" > "$WORK/vmm_probe.json" 2>> "$LOG" || { log "vmm_probe: exit $?"; status=1; }
    rm -f "$WORK/vmm_probe"
  else
    log "vmm_probe: build failed"; status=1
  fi
fi
pack

gpu_build -DGMB_WITH_TORCH=OFF -- gpumembench gmb_tests
BIN=build-gpu/gpumembench

log "GPU tests (GpuVmm*, and the plain VMM map test)"
guarded build-gpu/tests/gmb_tests --gtest_filter='GpuVmm*:Gpu.VmmMapAndUnmapTakeAndReturnPhysicalMemory' \
  > "$WORK/gpu_tests.log" 2>&1 || status=1
grep -E '^\[gpu\]|OK \]|FAILED|PASSED|SKIPPED' "$WORK/gpu_tests.log" | tee -a "$LOG"
pack

# configs/allocators.yaml for vmm_stitch and caching, on the GPU, then on sim from the same binary.
[ "${CONFIGS:-1}" = 0 ] && { log "configs skipped (CONFIGS=0)"; pack; exit $status; }
for dev in cuda sim; do
  log "allocators on $dev (vmm_stitch, caching; --steps $STEPS)"
  guarded "$BIN" --config configs/allocators.yaml --device "$dev" --allocator vmm_stitch --allocator caching \
    --steps "$STEPS" --metrics all --quiet --format md,csv,json --output "$WORK/allocators_$dev" \
    > "$WORK/allocators_$dev.log" 2>&1 || { log "allocators on $dev: exit $?"; status=1; }
  pack
done
log "done, status $status"
pack
exit $status
