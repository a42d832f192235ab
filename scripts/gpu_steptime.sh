#!/usr/bin/env bash
# Issue 14, part 3 on the GPU machine (device tool; no internet there): builds the step-time
# probe (scripts/probe/step_probe.cpp) and runs it on the dynamic_seq and fixed_seq models, under
# a deadline (default 300 s), packing everything into one tar rewritten after each step so a run
# cut short still brings back what it finished.
#
#   OUT=/some/dir bash scripts/gpu_steptime.sh        # default OUT: ./gpu_out
#   DEADLINE_S=300 STEPS=12 LOOP_STEPS=6              # the defaults
#   SECTIONS=loop                                     # only the loop section (default: all but loop)
#   CONFIGS="configs/a.yaml configs/b.yaml"           # the models (default dynamic_seq and fixed_seq)
#
# Brings back $OUT/steptime_gpu.tar.gz: steptime_gpu/{run.log,environment.txt,build.log,
# step_probe.json,step_probe.log,ops_0.csv.gz (the first config),ops_1.csv.gz (the second), with the loop
# section ops_loop_{0,1}_{0,1}.csv.gz (config, managed)}.
# devices/step_time_model.h fits its constants from these (docs/STEP_TIME.md).
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
source scripts/gpu_lib.sh
STEPS="${STEPS:-12}"
LOOP_STEPS="${LOOP_STEPS:-6}"
SECTIONS="${SECTIONS:-launch,waits,managed,ops}"
gpu_job steptime_gpu 300

gpu_build -DGMB_BUILD_TESTS=OFF -DGMB_BUILD_BENCH=OFF -- gmb_step_probe

CONFIGS="${CONFIGS:-configs/dynamic_seq.yaml configs/fixed_seq.yaml}"
config_args=()
for c in $CONFIGS; do case "$c" in /*) config_args+=(--config "$c") ;; *) config_args+=(--config "$PWD/$c") ;; esac; done
log "step_probe ($SECTIONS; $CONFIGS, $STEPS steps, loop $LOOP_STEPS steps)"
(cd "$WORK" && guarded "$OLDPWD/build-gpu/gmb_step_probe" "${config_args[@]}" \
   --steps "$STEPS" --loop-steps "$LOOP_STEPS" --sections "$SECTIONS" --ops "$WORK/ops" \
   > "$WORK/step_probe.json" 2> "$WORK/step_probe.log") || { log "step_probe: exit $?"; status=1; }
tail -5 "$WORK/step_probe.log" | tee -a "$LOG"
gzip -f "$WORK"/ops_*.csv 2>/dev/null
log "done, status $status"
pack
exit $status
