#!/usr/bin/env bash
# Reference measurements on the GPU machine, in one command:
#
#     bash scripts/gpu_reference.sh
#
# 1. builds and runs scripts/probe/driver_probe.cu (cudaMalloc placement, small-allocation
#    packing, cudaMemPool growth, latency)                      -> $OUT/driver_probe.json
# 2. generates the reference traces (scripts/gen_reference_traces.py) and replays them
#    through real PyTorch (scripts/torch_reference.py)          -> $OUT/torch_ref.tar.gz
#    (ref/: <case>.csv.gz, <case>.segments.json.gz, manifest.json; traces/: the traces and
#    cases.json), plus a copy of ref/manifest.json            -> $OUT/torch_ref_manifest.json
# 3. everything printed                                         -> $OUT/reference.log
#
# OUT defaults to ./ref_out (there the unpacked ref/ and traces/ are kept as well).
# Environment: TORCH_REF_ARGS adds arguments to torch_reference.py (e.g. "--only es__");
# PROBE_ARGS to driver_probe (e.g. "--only placement").
# Exit status: 0 when every step succeeded, 1 otherwise (the outputs of the steps that
# succeeded are written regardless).

set -u
set -o pipefail

cd "$(dirname "$0")/.." || exit 1
REPO=$(pwd)
if [ -n "${OUT:-}" ]; then
    DEST="$OUT"
    KEEP_UNPACKED=0
else
    DEST="$REPO/ref_out"
    KEEP_UNPACKED=1
fi
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
LOG="$DEST/reference.log"
: > "$LOG"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpumembench_ref.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG"; }
status=0

log "gpu_reference.sh in $REPO -> $DEST (work $WORK)"
{
    echo "git: $(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo none)"
    uname -a
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
    nvcc --version 2>&1 | tail -2
    python3 --version 2>&1
    python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1
} 2>&1 | tee -a "$LOG"

# ---- 1. driver probe ---------------------------------------------------------------------
log "building driver_probe"
if nvcc -O2 -std=c++17 -o "$WORK/driver_probe" scripts/probe/driver_probe.cu -lcuda 2>&1 | tee -a "$LOG"; then
    log "running driver_probe ${PROBE_ARGS:-}"
    t0=$(date +%s)
    # JSON on stdout, progress on stderr (into the log)
    # shellcheck disable=SC2086
    timeout 150 "$WORK/driver_probe" ${PROBE_ARGS:-} > "$WORK/driver_probe.json" 2> >(tee -a "$LOG" >&2)
    rc=$?
    cp "$WORK/driver_probe.json" "$DEST/driver_probe.json"
    if [ $rc -ne 0 ]; then
        log "driver_probe FAILED (exit $rc)"
        status=1
    fi
    if python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('driver_probe.json ok, failed sections:', d.get('failed_sections'))" "$DEST/driver_probe.json" 2>&1 | tee -a "$LOG"; then :; else
        log "driver_probe.json is not valid JSON"
        status=1
    fi
    log "driver_probe took $(( $(date +%s) - t0 )) s"
else
    log "driver_probe build FAILED"
    status=1
fi

# ---- 2. PyTorch reference replays ----------------------------------------------------------
log "generating traces"
if python3 -u scripts/gen_reference_traces.py "$WORK/traces" --list 2>&1 | tee -a "$LOG"; then
    log "replaying through PyTorch ${TORCH_REF_ARGS:-}"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    timeout 420 python3 -u scripts/torch_reference.py --traces "$WORK/traces" --out "$WORK/ref" \
        ${TORCH_REF_ARGS:-} 2>&1 | tee -a "$LOG"
    rc=$?
    log "torch_reference.py exit $rc after $(( $(date +%s) - t0 )) s"
    [ $rc -eq 0 ] || status=1
    if [ -d "$WORK/ref" ]; then
        tar -czf "$DEST/torch_ref.tar.gz" -C "$WORK" ref traces
        [ -f "$WORK/ref/manifest.json" ] && cp "$WORK/ref/manifest.json" "$DEST/torch_ref_manifest.json"
        log "wrote $DEST/torch_ref.tar.gz ($(du -h "$DEST/torch_ref.tar.gz" | cut -f1), $(ls "$WORK/ref" | wc -l) files)"
        if [ $KEEP_UNPACKED -eq 1 ]; then
            rm -rf "$DEST/ref" "$DEST/traces"
            cp -r "$WORK/ref" "$WORK/traces" "$DEST/"
        fi
    else
        log "no PyTorch reference output"
        status=1
    fi
else
    log "trace generation FAILED"
    status=1
fi

log "done, status $status; outputs:"
ls -la "$DEST" 2>&1 | tee -a "$LOG"
exit $status
