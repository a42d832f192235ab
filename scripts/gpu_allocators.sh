#!/usr/bin/env bash
# Issue 15 on the GPU machine (device tool; no internet there): builds gpumembench and the tests,
# runs the bfc/ideal GPU tests, configs/allocators.yaml and the C13 comparison
# (configs/c13_bfc_growth.yaml) on the GPU and on sim from the same build, and packs everything
# into one tar. Every step runs under what is left of a deadline (default 340 s), and the tar is
# rewritten after each step, so a run cut short still brings back what it finished.
#
#   OUT=/some/dir bash scripts/gpu_allocators.sh          # default OUT: ./gpu_out
#   DEADLINE_S=340 STEPS=100                              # the defaults
#   GPU_TEST_FILTER='GpuBfc*:...'                         # which Gpu* tests (default: bfc, ideal, workers)
#   FULL_CONFIGS="hole_pattern fragmentation_oom"         # also run these configs whole on the GPU
#
# Brings back $OUT/allocators_gpu.tar.gz: allocators_gpu/{run.log,environment.txt,gpu_tests.log,
# allocators_{cuda,sim}/,c13_{cuda,sim}/} (each a results folder: results.md/csv/json, cases/).
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job allocators_gpu 340
STEPS="${STEPS:-100}"

gpu_build -- gpumembench gmb_tests
BIN=build-gpu/gpumembench

log "GPU tests (bfc and ideal; caching's for reference; GPU case isolation)"
guarded build-gpu/tests/gmb_tests \
  --gtest_filter="${GPU_TEST_FILTER:-GpuBfc*:Gpu.PolicyAllocatorsDecideTheSameOnGpuAndSim:GpuWorkers*}" \
  > "$WORK/gpu_tests.log" 2>&1 || status=1
grep -E '^\[gpu\]|OK \]|FAILED|PASSED|SKIPPED' "$WORK/gpu_tests.log" | tee -a "$LOG"
pack

# Each config on the GPU, then on sim from the same binary (the labelled sim comparison).
for cfg in c13_bfc_growth allocators; do
  for dev in cuda sim; do
    log "$cfg on $dev (--steps $STEPS)"
    guarded "$BIN" --config "configs/$cfg.yaml" --device "$dev" --steps "$STEPS" --metrics all --quiet \
      --format md,csv,json --output "$WORK/${cfg}_$dev" > "$WORK/${cfg}_$dev.log" 2>&1 || { log "$cfg on $dev: exit $?"; status=1; }
    pack
  done
done
# Shipped configs whole on the GPU (every step), for results/h200/ in the current table layout.
for cfg in ${FULL_CONFIGS:-}; do
  log "$cfg on cuda (whole)"
  guarded "$BIN" --config "configs/$cfg.yaml" --device cuda --quiet --output "$WORK/full_$cfg" \
    > "$WORK/full_$cfg.log" 2>&1 || { log "$cfg on cuda: exit $?"; status=1; }
  pack
done
log "done, status $status"
pack
exit $status
