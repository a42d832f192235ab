#!/usr/bin/env python3
"""What scripts/gpu_cap_probe.sh measured, as figures (results/h200/probe/cap/README.md quotes them).

    python3 scripts/probe/cap_calls.py results/h200/probe/cap

- *_calls.csv.gz (GMB_CUDA_CALL_LOG: call,bytes,ok,wait_us,call_us per cudaMalloc / cudaFree):
  the host time of the cudaMallocs made right after a cudaFree against the other cudaMallocs
  (10th / 50th / 90th percentile, sum).
- free_cost.csv.gz (cap_probe free_cost): per mode and size, the sum of each round's cudaMalloc
  times, median over rounds 1-7 (round 0 reuses no freed memory).
"""
import csv
import gzip
import os
import statistics
import sys
from collections import defaultdict


def pct(v, p):
    v = sorted(v)
    return v[int(p * (len(v) - 1))]


def calls(path):
    with gzip.open(path, "rt") as f:
        rows = list(csv.DictReader(f))
    after, other = [], []
    for prev, row in zip(rows, rows[1:]):
        if row["call"] != "malloc" or row["ok"] != "1":
            continue
        (after if prev["call"] == "free" else other).append(float(row["call_us"]))
    for name, v in (("right after a cudaFree", after), ("others", other)):
        print(f"  cudaMalloc {name}: {len(v)} calls, p10 {pct(v, .1) / 1e3:.2f} ms, p50 {pct(v, .5) / 1e3:.2f} ms, "
              f"p90 {pct(v, .9) / 1e3:.2f} ms, sum {sum(v) / 1e6:.2f} s")


def free_cost(path):
    rounds = defaultdict(lambda: defaultdict(float))
    with gzip.open(path, "rt") as f:
        for r in csv.DictReader(f):
            if r["phase"] == "malloc":
                rounds[(r["mode"], int(r["size"]) >> 20)][int(r["round"])] += float(r["us"])
    for (mode, mib), per in sorted(rounds.items()):
        later = [per[k] for k in per if k > 0]
        print(f"  {mode:16s} {mib:5d} MiB: cudaMallocs of a round {statistics.median(later) / 1e3:.1f} ms (median of rounds 1-7)")


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "results/h200/probe/cap"
    for name in sorted(os.listdir(d)):
        if name.endswith("_calls.csv.gz"):
            print(name)
            calls(os.path.join(d, name))
    print("free_cost.csv.gz")
    free_cost(os.path.join(d, "free_cost.csv.gz"))


if __name__ == "__main__":
    main()
