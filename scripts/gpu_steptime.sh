#!/usr/bin/env bash
# Issue 14, part 3 on the GPU machine (device tool; no internet there): builds the step-time
# probe (scripts/probe/step_probe.cpp) and runs it on the dynamic_seq and fixed_seq models, under
# a deadline (default 300 s), packing everything into one tar rewritten after each step so a run
# cut short still brings back what it finished.
#
#   OUT=/some/dir bash scripts/gpu_steptime.sh        # default OUT: ./gpu_out
#   DEADLINE_S=300 STEPS=12 LOOP_STEPS=6              # the defaults
#   SECTIONS=loop                                     # only the loop section (default: all but loop)
#
# Brings back $OUT/steptime_gpu.tar.gz: steptime_gpu/{run.log,environment.txt,build.log,
# step_probe.json,step_probe.log,ops_0.csv.gz (dynamic_seq),ops_1.csv.gz (fixed_seq), with the loop
# section ops_loop_{0,1}_{0,1}.csv.gz (config, managed)}.
# devices/step_time_model.h fits its constants from these (docs/STEP_TIME.md).
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-$PWD/gpu_out}"
STEPS="${STEPS:-12}"
LOOP_STEPS="${LOOP_STEPS:-6}"
SECTIONS="${SECTIONS:-launch,waits,managed,ops}"
START=$(date +%s)
DEADLINE=$((START + ${DEADLINE_S:-300}))
WORK="$(mktemp -d)/steptime_gpu"
mkdir -p "$OUT" "$WORK"
LOG="$WORK/run.log"
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
pack() { tar -czf "$OUT/steptime_gpu.tar.gz.tmp" -C "$(dirname "$WORK")" steptime_gpu &&
         mv "$OUT/steptime_gpu.tar.gz.tmp" "$OUT/steptime_gpu.tar.gz"; }
left() { echo $(( DEADLINE - $(date +%s) )); }
guarded() {
  local t=$(( $(left) - 10 ))
  if [ "$t" -le 5 ]; then log "SKIPPED (deadline): $*"; status=1; return 1; fi
  timeout "$t" "$@"
}
status=0

{
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo none) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
} > "$WORK/environment.txt"

log "build (gmb_step_probe)"
export PATH="$PATH:/usr/local/cuda/bin"
gen=(); command -v ninja >/dev/null && [ ! -f build-gpu/CMakeCache.txt ] && gen=(-G Ninja)
if ! guarded cmake -S . -B build-gpu "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DGMB_BUILD_TESTS=OFF -DGMB_BUILD_BENCH=OFF >> "$LOG" 2>&1 ||
   ! guarded cmake --build build-gpu --target gmb_step_probe -j"$(nproc)" > "$WORK/build.log" 2>&1; then
  tail -30 "$WORK/build.log" 2>/dev/null | tee -a "$LOG"
  log "BUILD FAILED"; pack; exit 1
fi
pack

log "step_probe ($SECTIONS; dynamic_seq and fixed_seq, $STEPS steps, loop $LOOP_STEPS steps)"
(cd "$WORK" && guarded "$OLDPWD/build-gpu/gmb_step_probe" --config "$OLDPWD/configs/dynamic_seq.yaml" \
   --config "$OLDPWD/configs/fixed_seq.yaml" --steps "$STEPS" --loop-steps "$LOOP_STEPS" --sections "$SECTIONS" --ops "$WORK/ops" \
   > "$WORK/step_probe.json" 2> "$WORK/step_probe.log") || { log "step_probe: exit $?"; status=1; }
tail -5 "$WORK/step_probe.log" | tee -a "$LOG"
gzip -f "$WORK"/ops_*.csv 2>/dev/null
log "done, status $status"
pack
exit $status
