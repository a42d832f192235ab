#!/usr/bin/env bash
# The whole GPU test suite on the GPU machine (device tool), in one call: builds gpumembench and
# the tests (with PyTorch's allocator where libtorch is found) and runs every Gpu* test under a
# deadline (default 420 s). A session's last GPU call: what its closing note reports.
#
#   OUT=/some/dir bash scripts/gpu_verify.sh       # default OUT: ./gpu_out
#   GPU_TEST_FILTER='Gpu*'                         # the default
#   PLOTS="results/h200/allocators/cuda ..."       # also plot these committed results folders
#
# Brings back $OUT/verify_gpu.tar.gz: verify_gpu/{run.log,environment.txt,build.log,gpu_tests.log}.
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_lib.sh
gpu_job verify_gpu 420

gpu_build -- gpumembench gmb_tests
# GpuTorchSnapshots replays PyTorch's recordings on the whole card, where the driver's placement
# of each cudaMalloc decides PyTorch's best-fit ties: it needs a process whose CUDA context no
# other test has used (after the other Gpu* tests in one process, 7 of 11 differ by up to 2 MiB
# of allocated bytes; alone, 10 of 11 are exact).
filter="${GPU_TEST_FILTER:-Gpu*}"
for part in "$filter:-GpuTorchSnapshots*" "GpuTorchSnapshots*"; do
  [ "$part" = "GpuTorchSnapshots*" ] && [[ "$filter" != *Gpu\** && "$filter" != *GpuTorchSnapshots* ]] && continue
  log "GPU tests ($part)"
  guarded build-gpu/tests/gmb_tests --gtest_filter="$part" >> "$WORK/gpu_tests.log" 2>&1 || status=1
done
grep -E '^\[gpu\]|^\[gpu-snapshot\]|OK \]|FAILED|PASSED|SKIPPED|tests? from .* ran' "$WORK/gpu_tests.log" | tee -a "$LOG"
# Plots of committed GPU results where matplotlib is there (scripts/plot.py; not a test).
for dir in ${PLOTS:-}; do
  name=$(echo "$dir" | tr '/' '_')
  guarded python3 scripts/plot.py "$dir" --out "$WORK/plots/$name" --formats png >> "$LOG" 2>&1 || log "plot $dir: exit $?"
done
pack
log "done, status $status"
pack
exit $status
