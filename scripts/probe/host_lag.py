#!/usr/bin/env python3
"""How far the host runs ahead of the GPU, from GMB_CUDA_CALL_LOG call logs of a cudaMemPool run
(a GPU's, or the simulated device's, which writes the same columns in modeled time).

    python3 scripts/probe/host_lag.py results/h200/probe/pool/timeline/pool_dynamic_calls.csv.gz \
        /tmp/sim/calls.csv.<pid>.1

For each log: the frees the GPU had not reached at each cudaMallocFromPoolAsync (the log's
free_async rows so far less its frees_done), as quantiles; the host's time per step (a step ends
with the optimizer's run of 250 or more frees); and the launches the host waited in (a gap of
300 us or more before a `launch` row), split by whether the GPU had then reached every free.
"""
import csv
import gzip
import sys

STALL_US = 300.0


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.DictReader(f))
    frees, seq = 0, []
    for r in rows:
        if r["call"] == "free_async":
            frees += 1
        seq.append((r["call"], float(r["t_us"]), frees - int(r["frees_done"])))
    ends, i = [], 0  # the row after each step's run of frees
    while i < len(seq):
        if seq[i][0] != "free_async":
            i += 1
            continue
        j, n = i, 0
        while j < len(seq) and seq[j][0] in ("free_async", "launch"):
            n += seq[j][0] == "free_async"
            j += 1
        if n >= 250:
            ends.append(j)
        i = j
    return seq, ends


def quantiles(v, qs=(0.1, 0.25, 0.5, 0.75, 0.9, 0.99)):
    v = sorted(v)
    return [v[min(len(v) - 1, int(len(v) * q))] for q in qs] if v else []


def report(path):
    seq, ends = load(path)
    lag = [s[2] for s in seq if s[0] == "malloc_async"]
    print(path)
    print(f"  rows {len(seq)}, steps {len(ends)}")
    print(f"  frees not reached at a malloc, 10/25/50/75/90/99th percentile: {quantiles(lag)}")
    if len(ends) > 2:
        steps = [(seq[ends[k + 1]][1] - seq[ends[k]][1]) / 1000 for k in range(len(ends) - 2)]
        print(f"  host ms per step, same percentiles: {[round(x, 1) for x in quantiles(steps)]}, "
              f"mean {sum(steps) / len(steps):.2f}")
    drained = kept = 0
    drained_ms = kept_ms = 0.0
    for k in range(1, len(seq)):
        gap = seq[k][1] - seq[k - 1][1]
        if seq[k][0] == "launch" and gap >= STALL_US:
            if seq[k][2] == 0:
                drained, drained_ms = drained + 1, drained_ms + gap / 1000
            else:
                kept, kept_ms = kept + 1, kept_ms + gap / 1000
    n = max(1, len(ends))
    print(f"  launches that waited {STALL_US:.0f} us or more: {drained} until the GPU had reached every free "
          f"({drained_ms / n:.1f} ms a step), {kept} not ({kept_ms / n:.1f} ms a step)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        report(p)
