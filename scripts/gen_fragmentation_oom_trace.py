#!/usr/bin/env python3
"""Writes the allocation trace of configs/fragmentation_oom.yaml, and a cases.json for
scripts/torch_reference.py, so real PyTorch can replay the same events on a GPU:

    python3 scripts/gen_fragmentation_oom_trace.py            # -> configs/traces/fragmentation_oom/
    python3 scripts/torch_reference.py --traces configs/traces/fragmentation_oom --out OUT   # on the GPU
    gpumembench replay --trace configs/traces/fragmentation_oom/fragmentation_oom.csv \\
        --allocator caching --capacity 1792MiB                                      # ours

Each step: eight 200 MiB allocations, all freed; eight 110 MiB allocations, then 300 MiB; then
everything is freed (the same events, in the same order, as the hole_pattern workload of the
config). Deterministic: no randomness.
"""
import json
import os
import sys

MiB = 1 << 20
STEPS = 3
BIG, SMALL, PROBE, N = 200 * MiB, 110 * MiB, 300 * MiB, 8


def events():
    rows = []
    for step in range(STEPS):
        base = step * (2 * N + 1)
        rows += [("alloc", base + i, BIG) for i in range(N)]
        rows += [("free", base + i, None) for i in range(N)]
        probes = [SMALL] * N + [PROBE]
        rows += [("alloc", base + N + j, b) for j, b in enumerate(probes)]
        rows += [("free", base + N + j, None) for j in reversed(range(len(probes)))]
    return rows


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "configs", "traces", "fragmentation_oom")
    os.makedirs(out, exist_ok=True)
    rows = events()
    with open(os.path.join(out, "fragmentation_oom.csv"), "w") as f:
        f.write("action,id,bytes,stream\n")
        for action, i, b in rows:
            f.write("%s,%d,%s,0\n" % (action, i, "" if b is None else b))
    cases = []
    for conf, tag in (("", "default"), ("expandable_segments:True", "expandable")):
        for limit in (1792 * MiB, 2048 * MiB):
            cases.append({"name": "%s__fragmentation_oom__%dm" % (tag, limit // MiB),
                          "trace": "fragmentation_oom.csv", "alloc_conf": conf, "limit_bytes": limit,
                          "description": "configs/fragmentation_oom.yaml's events under a %d MiB limit"
                                         % (limit // MiB)})
    manifest = {"schema_version": 1, "generator": "scripts/gen_fragmentation_oom_trace.py",
                "trace_format": "action,id,bytes,stream", "cases": cases}
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote %d events and %d cases to %s" % (len(rows), len(cases), out))


if __name__ == "__main__":
    main()
