#!/usr/bin/env bash
# Runs again every simulated-device result folder this repository ships, from one binary, so
# that no table in results/ is older than the sim's models (after a change to devices/sim_* or
# to a workload). Usage, from the repository root after scripts/build.sh:
#
#     bash scripts/regen_sim_results.sh            # BIN=path/to/gpumembench to pick another build
#
# Folders (each as its README says it was made; what a folder kept, it keeps):
#   results/sim/{dynamic_seq,fixed_seq}: whole configs, md/csv/json/latex (+ oom/ block maps and,
#     for dynamic_seq, its plots); results/sim/c13_bfc_growth: the whole config, md/csv/json;
#   results/h200/{allocators,c13_bfc_growth}/sim: --steps 100 --metrics all (md/csv/json, cases/,
#     oom/); results/h200/vmm_stitch/sim: allocators.yaml for vmm_stitch and caching, results.md
#     and results.csv only; then results/h200/sim_vs_h200.md (python3 scripts/sim_vs_h200.py).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-build/gpumembench}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# run NAME DEST KEEP... -- ARGS...: runs into DEST itself (the command a results.json records is
# then the one to type), keeping of the new output only the KEEP entries; DEST's other entries
# (plots, a README) stay as they were, and a failed run puts DEST back as it was.
run() {
  local name=$1 dest=$2; shift 2
  local keep=()
  while [ "$1" != -- ]; do keep+=("$1"); shift; done
  shift
  echo "== $dest"
  local old="$tmp/old_$name"
  if [ -d "$dest" ]; then mv "$dest" "$old"; else mkdir -p "$old"; fi
  if ! "$BIN" --device sim --quiet --output "$dest" "$@" > "$tmp/$name.log" 2>&1; then
    echo "regen_sim_results: $dest failed:"; tail -5 "$tmp/$name.log"
    rm -rf "$dest"; mv "$old" "$dest"; exit 1
  fi
  local entry base k kept
  for entry in "$dest"/* "$dest"/.[!.]*; do  # the new output: only the KEEP entries stay
    [ -e "$entry" ] || continue
    base=$(basename "$entry") kept=0
    for k in "${keep[@]}"; do [ "$k" = "$base" ] && kept=1; done
    [ $kept = 1 ] || rm -rf "$entry"
  done
  # An OOM's event timeline over 1 MB is kept compressed (results.md names the .csv).
  [ -d "$dest/oom" ] && find "$dest/oom" -name '*.timeline.csv' -size +1M -exec gzip -9 -n {} \;
  for entry in "$old"/* "$old"/.[!.]*; do  # the folder's other entries, as they were
    [ -e "$entry" ] || continue
    [ -e "$dest/$(basename "$entry")" ] || cp -r "$entry" "$dest/"
  done
}

run dyn results/sim/dynamic_seq results.md results.csv results.json results.tex oom -- \
  --config configs/dynamic_seq.yaml --format md,csv,json,latex
if python3 -c 'import matplotlib' 2>/dev/null; then
  "$BIN" plot results/sim/dynamic_seq --formats png > /dev/null  # into results/sim/dynamic_seq/plots
else
  echo "regen_sim_results: no matplotlib, results/sim/dynamic_seq/plots left as they were"
fi
run fixed results/sim/fixed_seq results.md results.csv results.json results.tex -- \
  --config configs/fixed_seq.yaml --format md,csv,json,latex
run c13 results/sim/c13_bfc_growth results.md results.csv results.json cases -- \
  --config configs/c13_bfc_growth.yaml --format md,csv,json
run h_alloc results/h200/allocators/sim results.md results.csv results.json cases oom -- \
  --config configs/allocators.yaml --steps 100 --metrics all --format md,csv,json
run h_c13 results/h200/c13_bfc_growth/sim results.md results.csv results.json cases -- \
  --config configs/c13_bfc_growth.yaml --steps 100 --metrics all --format md,csv,json
run h_vmm results/h200/vmm_stitch/sim results.md results.csv -- \
  --config configs/allocators.yaml --allocator vmm_stitch --allocator caching --steps 100 --metrics all \
  --format md,csv,json
python3 scripts/sim_vs_h200.py
echo "regen_sim_results: done"
