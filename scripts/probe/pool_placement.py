#!/usr/bin/env python3
"""Counts how many of the H200's cudaMemPool placements a rule predicts, from the op-by-op
probe files (results/h200/probe/pool/pool_mix_*.csv.gz), each judged from the H200's own state.

    python3 scripts/probe/pool_placement.py results/h200/probe/pool/pool_mix_s*_r0.csv.gz

Rules: `best` (best fit over every free range) and `tiered` (best fit first over the ranges
freed since the frees last completed, merged only with each other; when none holds the request,
all of them count as completed and best fit runs over every free range). Synchronized files
(`_sync_`) complete every free at once."""
import csv
import gzip
import sys

END = 1 << 62  # the pool's unbounded tail


def rows(path):
    with gzip.open(path, "rt") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def add(ranges, start, end):
    ranges.append([start, end])
    ranges.sort()
    merged = []
    for a, b in ranges:
        if merged and merged[-1][1] == a:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    ranges[:] = merged


def take(ranges, start, end):
    out = []
    for a, b in ranges:
        if b <= start or a >= end:
            out.append([a, b])
            continue
        if a < start:
            out.append([a, start])
        if b > end:
            out.append([end, b])
    ranges[:] = out


def best_fit(ranges, size):
    fits = [(b - a, a) for a, b in ranges if b - a >= size]
    return min(fits)[1] if fits else None


def score(path, rule):
    sync = "_sync_" in path
    live, free, recent, hits, total = {}, [[0, END]], [], 0, 0
    for r in rows(path):
        if r["kind"] == "free":
            s, e = live.pop(r["slot"])
            add(recent, s, e)
            if sync or rule == "best":
                for a, b in recent:
                    add(free, a, b)
                recent = []
            continue
        size = (max(int(r["bytes"]), 1) + 511) // 512 * 512
        guess = best_fit(recent, size)
        if guess is None:
            for a, b in recent:
                add(free, a, b)
            recent = []
            guess = best_fit(free, size)
        actual = int(r["offset"])
        total += 1
        hits += guess == actual
        live[r["slot"]] = (actual, actual + size)
        take(recent, actual, actual + size)
        take(free, actual, actual + size)
    return hits, total


if __name__ == "__main__":
    sums = {"best": [0, 0], "tiered": [0, 0]}
    for path in sys.argv[1:]:
        line = [path]
        for rule in sums:
            h, t = score(path, rule)
            sums[rule][0] += h
            sums[rule][1] += t
            line.append(f"{rule} {h}/{t}")
        print("  ".join(line))
    print("  ".join(["all"] + [f"{rule} {h}/{t}" for rule, (h, t) in sums.items()]))
