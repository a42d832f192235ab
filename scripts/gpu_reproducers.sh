#!/usr/bin/env bash
# Runs every committed OOM reproducer (results/h200/reproducers/*/repro_torch.py, written by
# `gpumembench reduce`) in real PyTorch on the GPU machine: under its own settings it must OOM at
# the predicted event (exit 1); where it has contrast settings, under those it must not OOM
# (exit 0). Needs python3 with PyTorch and one GPU; nothing to build.
#
#   OUT=/some/dir bash scripts/gpu_reproducers.sh     # default OUT: ./gpu_out
#
# Writes $OUT/reproducers/NAME.log (own settings), NAME.contrast.log and $OUT/reproducers/summary.txt
# (one line per run: name, settings, exit status, expected, verdict). Exit 0 when every run gave
# what was predicted, 1 otherwise.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-$PWD/gpu_out}"
LOGS="$OUT/reproducers"
mkdir -p "$LOGS"
SUMMARY="$LOGS/summary.txt"
{
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo none)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader 2>&1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
} > "$SUMMARY"
status=0
run() {  # NAME SCRIPT EXPECTED LOG [ARGS...]
  local name=$1 script=$2 expected=$3 log=$4
  shift 4
  PYTHONUNBUFFERED=1 timeout 600 python3 "$script" "$@" > "$log" 2>&1
  local rc=$?
  local verdict=ok
  [ "$rc" = "$expected" ] || { verdict=DIFFERS; status=1; }
  printf '%-40s %-12s exit %s (expected %s) %s: %s\n' "$name" "${*:-own}" "$rc" "$expected" "$verdict" \
    "$(grep -E '^(REPRODUCED|OOM ELSEWHERE|NO OOM)' "$log" | head -1)" | tee -a "$SUMMARY"
}
found=0
for script in results/h200/reproducers/*/repro_torch.py; do
  [ -f "$script" ] || continue
  found=1
  name=$(basename "$(dirname "$script")")
  run "$name" "$script" 1 "$LOGS/$name.log"
  if grep -q '^CONTRAST_ALLOC_CONF = "' "$script"; then
    run "$name" "$script" 0 "$LOGS/$name.contrast.log" --contrast
  fi
done
[ "$found" = 1 ] || { echo "no reproducers under results/h200/reproducers/" | tee -a "$SUMMARY"; status=1; }
exit $status
