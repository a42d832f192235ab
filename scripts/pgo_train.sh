#!/usr/bin/env bash
# The replays a profile-guided build learns from (GMB_PGO=generate, CMakeLists.txt): run by
# scripts/build.sh between its two stages, with the instrumented binary.
#
#     scripts/pgo_train.sh BUILD_DIR
#
# What a user's replays run through the per-event loops, each path at least once:
#   - a native CSV made for it (scripts/gen_trace.py: 400,000 events, seed 7, 4,096 live
#     buffers, two streams; the speed benchmark's trace is seed 1 with 1,024), through
#     `caching` with its defaults, with expandable segments, with max_split_size_mb, and under
#     a 2 GiB cap (OOMs);
#   - the shipped CSV traces (alignment patterns, a fragmentation OOM under a cap);
#   - recorded PyTorch snapshots (tests/data/torch_snapshots/: default settings, expandable
#     segments, two streams, an OOM under a cap, one with frames in protocol 2);
#   - configs/dynamic_seq.yaml on sim, 40 steps (the synthetic transformer's steps).
# About 2 s with the instrumented binary (1.6 s on this 2-core machine). Outputs go to a
# temporary folder, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:?usage: scripts/pgo_train.sh BUILD_DIR}"
gmb="$build/gpumembench"
[ -x "$gmb" ] || { echo "pgo_train: $gmb is not built" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 scripts/gen_trace.py 400000 "$work/train.csv" --seed 7 --live 4096
replay() { "$gmb" replay --device sim -q --output "$work/out" --overwrite "$@" >/dev/null; }
replay --trace "$work/train.csv" --allocator caching --capacity 80GiB
replay --trace "$work/train.csv" --allocator caching --capacity 80GiB --alloc-conf expandable_segments:True
replay --trace "$work/train.csv" --allocator caching --capacity 80GiB --alloc-conf max_split_size_mb:128
replay --trace "$work/train.csv" --allocator caching --capacity 2GiB
for t in configs/traces/alignment/*.csv; do
  replay --trace "$t" --allocator caching --capacity 80GiB
done
replay --trace configs/traces/fragmentation_oom/fragmentation_oom.csv --allocator caching --capacity 1792MiB
for s in snap_default snap_expandable snap_two_streams snap_oom_cap16g snap_frames_p2; do
  replay --trace "tests/data/torch_snapshots/$s.pickle.gz" --allocator caching
done
"$gmb" --config configs/dynamic_seq.yaml --device sim -q --steps 40 --output "$work/dyn" >/dev/null
echo "pgo_train: profile written under $(cd "$build" && cmake -L -N . 2>/dev/null | sed -n 's/^GMB_PGO_DIR:PATH=//p')"
