# Shared by the one-call GPU scripts (scripts/gpu_*.sh), sourced after `cd` to the repository:
#   gpu_job NAME DEFAULT_DEADLINE_S   sets OUT, START, DEADLINE, WORK ($tmp/NAME), LOG, status=0,
#                                     writes WORK/environment.txt
#   log TEXT...                       a timestamped line in the log and on stdout
#   finish                            logs the status, packs, exits with it
#   pack                              (re)writes $OUT/NAME.tar.gz from WORK: a run cut short by the
#                                     device's limit still brings back what it finished
#   guarded CMD...                    runs CMD under the time left to the deadline, less a margin
#                                     for the last pack; skips it (status=1) when none is left
#   gpu_build [CMAKE_ARGS...] -- TARGETS...   configures build-gpu (sm_90) and builds TARGETS (with
#                                     GMB_PGO=1 profile-guided, as scripts/install.sh builds);
#                                     exits 1 with the build log's tail when it fails
# The device tool brings back at most 8 files: one tar per script keeps every step's output.
# It also takes at most 64 MiB of working tree, and the committed results are more: leave the
# probe results (no GPU script reads them) out of the checkout for the call, then put them back:
#   git sparse-checkout set --no-cone '/*' '!/results/h200/probe/'   ...   git sparse-checkout disable
gpu_job() {
  GPU_JOB_NAME=$1
  OUT="${OUT:-$PWD/gpu_out}"
  START=$(date +%s)
  DEADLINE=$((START + ${DEADLINE_S:-$2}))
  WORK="$(mktemp -d)/$GPU_JOB_NAME"
  mkdir -p "$OUT" "$WORK"
  LOG="$WORK/run.log"
  status=0
  export PATH="$PATH:/usr/local/cuda/bin"
  {
    echo "git: $(git rev-parse HEAD 2>/dev/null || echo none) $(git status --porcelain 2>/dev/null | wc -l) changed files"
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
    echo "cpu: $(nproc) cores"
    nvcc --version 2>&1 | tail -2
  } > "$WORK/environment.txt"
}
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
pack() {
  tar -czf "$OUT/$GPU_JOB_NAME.tar.gz.tmp" -C "$(dirname "$WORK")" "$GPU_JOB_NAME" &&
    mv "$OUT/$GPU_JOB_NAME.tar.gz.tmp" "$OUT/$GPU_JOB_NAME.tar.gz"
}
left() { echo $(( DEADLINE - $(date +%s) )); }
# The script's end: its status logged and packed, and the exit with it.
finish() { log "done, status $status"; pack; exit "$status"; }
guarded() {
  local t=$(( $(left) - 10 ))
  if [ "$t" -le 5 ]; then log "SKIPPED (deadline): $*"; status=1; return 1; fi
  timeout "$t" "$@"
}
gpu_build() {
  local cmake_args=() targets=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do cmake_args+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  targets=("$@")
  log "build (${targets[*]})"
  # scripts/build.sh, as every build: with GMB_PGO=1 profile-guided, as scripts/install.sh builds.
  if ! guarded env BUILD_DIR=build-gpu BUILD_TARGET="${targets[*]}" scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90 \
       "${cmake_args[@]}" > "$WORK/build.log" 2>&1; then
    tail -30 "$WORK/build.log" 2>/dev/null | tee -a "$LOG"
    log "BUILD FAILED"; pack; exit 1
  fi
  build-gpu/gpumembench --version 2>&1 | tee -a "$LOG"
  pack
}
