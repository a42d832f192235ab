#!/usr/bin/env bash
# Issue 16 on the 2-GPU machine (device kind nvidia-h200-x2): the sweep of
# scripts/gpu_sweep_x2.yaml (8 GPU cases) run with --gpus all (one case per GPU at a time), then
# the same cases with --gpus 0 (one GPU), each wall time measured; the two merged (a merge refuses
# cases whose memory figures differ); every case's GPU UUID and free memory before it listed.
# Everything is packed into $OUT/sweep_x2.tar.gz (and $OUT/sweep_x2.log), also when a stage fails
# or the deadline guard (DEADLINE_S, default 450 s) cuts the run short.
#
#   bash scripts/gpu_sweep_x2.sh            # OUT defaults to ./gpu_out
#   DRY_SIM=1 BIN=build/gpumembench bash scripts/gpu_sweep_x2.sh   # the script itself, on sim
#     (no build; --jobs 2 and --jobs 1 in place of --gpus all and --gpus 0, --steps 5)
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-$PWD/gpu_out}"
mkdir -p "$OUT"
START=$(date +%s)
DEADLINE_S="${DEADLINE_S:-450}"
LOG="$OUT/sweep_x2.log"
W="$(mktemp -d)/sweep_x2"
mkdir -p "$W"
: > "$LOG"
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
left() { echo $(( DEADLINE_S - ($(date +%s) - START) )); }
# Packs the tables, logs and the per-case summaries (not the case files, OOM usage windows and
# block maps: they pass the device tool's 16 MiB limit); results.json too while it fits.
pack() {
  cp "$LOG" "$W/"
  local parent; parent="$(dirname "$W")"
  for drop in "" "--exclude=results.json"; do
    # shellcheck disable=SC2086
    tar -czf "$OUT/sweep_x2.tar.gz.tmp" -C "$parent" --exclude=cases --exclude=oom --exclude=timelines $drop sweep_x2 \
      && mv "$OUT/sweep_x2.tar.gz.tmp" "$OUT/sweep_x2.tar.gz"
    [ "$(stat -c %s "$OUT/sweep_x2.tar.gz")" -lt 15000000 ] && return
  done
}
trap pack EXIT
status=0
{
  echo "git: $(git rev-parse HEAD 2>/dev/null || echo none) $(git status --porcelain 2>/dev/null | wc -l) changed files"
  nvidia-smi --query-gpu=index,name,uuid,driver_version,memory.total,memory.used --format=csv 2>&1
  echo "cpu: $(nproc) cores"
} 2>&1 | tee -a "$LOG" > "$W/environment.txt"

DEVICE=(--device cuda)
par() { echo --gpus "$1"; }
if [ "${DRY_SIM:-0}" = 1 ]; then
  DEVICE=(--device sim --steps 5)
  par() { if [ "$1" = all ]; then echo --jobs 2; else echo --jobs 1; fi; }
else
  log "build (Release, CUDA, sm_90)"
  export PATH="$PATH:/usr/local/cuda/bin"
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  if ! { cmake -S . -B build-x2 "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DGMB_WITH_CUDA=ON \
          && cmake --build build-x2 --target gpumembench -j32; } > "$W/build.log" 2>&1; then
    tail -30 "$W/build.log" | tee -a "$LOG"; log "BUILD FAILED"; exit 1
  fi
  BIN=build-x2/gpumembench
fi
"$BIN" --version | tee -a "$LOG"
CFG=scripts/gpu_sweep_x2.yaml
"$BIN" plan --config "$CFG" "${DEVICE[@]}" > "$W/plan.jsonl"
log "$(wc -l < "$W/plan.jsonl") cases"

# One sweep: --gpus $1 into $W/$2, its wall time in $W/$2.wall_s.
sweep() {
  local gpus="$1" name="$2" t0 t1
  if [ "$(left)" -lt 60 ]; then log "deadline: $name not run"; status=1; return; fi
  log "sweep $(par "$gpus") -> $name"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046  # par: two words
  timeout "$(( $(left) - 20 ))" "$BIN" --config "$CFG" "${DEVICE[@]}" $(par "$gpus") --output "$W/$name" \
    > "$W/$name.out" 2> "$W/$name.err" || { log "sweep --gpus $gpus exited $?"; status=1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", b - a }' > "$W/$name.wall_s"
  log "sweep --gpus $gpus: $(cat "$W/$name.wall_s") s wall"
  tail -3 "$W/$name.err" | tee -a "$LOG"
}
sweep all gpus_all
sweep 0 gpus_0
pack

log "merge"
"$BIN" merge "$W/gpus_all" --output "$W/merged" > "$W/merged.out" 2> "$W/merged.err" || { log "merge exited $?"; status=1; }
# Both sweeps joined: a case whose memory figures differ between them is refused (exit 2).
"$BIN" merge "$W/gpus_all" "$W/gpus_0" --output "$W/merged_both" > "$W/merged_both.out" 2> "$W/merged_both.err"
echo "merge of --gpus all and --gpus 0 exited $?" | tee -a "$LOG"
cat "$W/merged_both.err" | tee -a "$LOG"

# Per case file: where and when it ran, and its headline figures (cases_brief.json of each sweep).
python3 - "$W" <<'PY'
import json, sys, os, glob
w = sys.argv[1]
for name in ("gpus_all", "gpus_0"):
    out = []
    for p in sorted(glob.glob(os.path.join(w, name, "cases", "*.json"))):
        j = json.load(open(p)); r = j["result"]; m = r["runs"][0] if r["runs"] else {}
        oom = m.get("first_oom") or {}
        out.append({"id": j["id"], "plan_index": j.get("plan_index"), "label": r["label"], "gpu": r.get("gpu"),
                    "started_at": j["started_at"], "finished_at": j["finished_at"], "error": r["error"],
                    "peak_reserved_bytes": m.get("peak_reserved_bytes"), "peak_allocated_bytes": m.get("peak_allocated_bytes"),
                    "device_allocs": m.get("device_allocs"), "device_frees": m.get("device_frees"), "ooms": m.get("ooms"),
                    "first_oom": {k: oom.get(k) for k in ("step", "event", "requested_bytes", "kind")} if oom else None,
                    "seconds": m.get("seconds")})
    out.sort(key=lambda c: c["plan_index"] or 0)
    json.dump(out, open(os.path.join(w, name + "_cases_brief.json"), "w"), indent=1)
PY

# Per case: the GPU, its free memory before the case, and the figures of both sweeps.
python3 - "$W" > "$W/summary.md" 2>&1 <<'PY'
import json, sys, os
w = sys.argv[1]
def cases(name):
    p = os.path.join(w, name, "results.json")
    return {c["label"]: c for c in json.load(open(p))["cases"]} if os.path.exists(p) else {}
a, one = cases("gpus_all"), cases("gpus_0")
wall = {n: open(os.path.join(w, n + ".wall_s")).read().strip() for n in ("gpus_all", "gpus_0") if os.path.exists(os.path.join(w, n + ".wall_s"))}
print(f"wall time: --gpus all {wall.get('gpus_all', '?')} s, --gpus 0 {wall.get('gpus_0', '?')} s\n")
print("| case | GPU (--gpus all) | UUID | free before (GiB) | peak reserved all / 0 | peak allocated all / 0 | OOM all / 0 | device mallocs all / 0 | equal |")
print("|---|---|---|---:|---|---|---|---|---|")
equal = 0
diffs = []
for label, c in a.items():
    g = c.get("gpu") or {}
    o = one.get(label, {})
    point = lambda x: None if not x.get("oom") else {k: x["oom"].get(k) for k in ("step", "event", "requested_bytes", "allocated_bytes", "reserved_bytes", "kind")}
    fa = (c.get("peak_reserved_bytes"), c.get("peak_allocated_bytes"), point(c), c.get("device_mallocs"))
    fo = (o.get("peak_reserved_bytes"), o.get("peak_allocated_bytes"), point(o), o.get("device_mallocs"))
    if fa[0] and fo[0] and fa[0] != fo[0]:
        diffs.append(f"{label}: peak reserved differs by {abs(fa[0]-fo[0])/2**20:.2f} MiB ({abs(fa[0]-fo[0])/fa[0]*100:.4f}%)")
    same = fa == fo
    equal += same
    oom = lambda x: "none" if not x.get("oom") else f"step {x['oom']['step']} event {x['oom']['event']}"
    print(f"| {label} | {g.get('visible_devices','?')} | {g.get('uuid','?')} | {g.get('free_bytes_before',0)/2**30:.2f} | "
          f"{fa[0]} / {fo[0]} | {fa[1]} / {fo[1]} | {oom(c)} / {oom(o) if o else '?'} | {fa[3]} / {fo[3]} | {'yes' if same else 'NO'} |")
print(f"\n{equal} of {len(a)} cases with equal peak reserved, peak allocated, OOM point and device mallocs")
for d in diffs: print("- " + d)
PY
cat "$W/summary.md" | tee -a "$LOG"
log "done, status $status"
exit $status
