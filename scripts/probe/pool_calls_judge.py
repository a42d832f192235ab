#!/usr/bin/env python3
"""Judge cudaMemPool placement rules against a pool call log recorded on the GPU.

    python3 scripts/probe/pool_calls_judge.py results/h200/probe/pool/kernels/dynamic_seq_cuda_mempool_calls.csv.gz [--ops 40000]

The log is GMB_CUDA_CALL_LOG's (columns call, bytes, ok, ptr and, for the rule `gpu`,
frees_done: how many of the logged cudaFreeAsync calls the GPU had reached when the call began).
The state follows the GPU's own placements; at each cudaMallocFromPoolAsync each rule says where
it would put the request, and the script counts how often that is where the GPU put it.

Every rule rounds requests up to 512 bytes and places best fit (the smallest free range that
holds the request, from its low end; the end of the pool when none does), first among the
"recent" frees (merged only with each other), then, when none of them holds it, over every free
range after a flush of the recent tier. They differ in:
  lowest   ties between equal ranges go to the lowest address; a flush empties the tier
  oldest   ties go to the range whose newest free is the oldest; a flush empties the tier
  gpu      as oldest, but a flush keeps the frees the GPU had not reached (frees_done)
  bestfit  no tier at all, ties to the lowest address
Prints the counts and the first decisions each rule gets wrong.
"""
import argparse
import bisect
import csv
import gzip

RULES = ("lowest", "oldest", "gpu", "bestfit")


def load(path, limit):
    ops, nfree = [], 0
    with gzip.open(path, "rt") as f:
        for row in csv.DictReader(f):
            if row["call"] not in ("malloc_async", "free_async") or row["ok"] != "1":
                continue
            ptr = int(row["ptr"], 16)
            if row["call"] == "malloc_async":
                ops.append(("alloc", ptr, int(row["bytes"]), int(row.get("frees_done") or 0)))
            else:
                ops.append(("free", ptr, nfree, 0))
                nfree += 1
            if limit and len(ops) >= limit:
                break
    return ops


def best(size, ranges, by_age):
    pick, key = None, None
    for r in ranges:
        a, e = r[0], r[1]
        if e - a < size:
            continue
        k = (e - a, r[2] if by_age else a, a)
        if key is None or k < key:
            pick, key = (a, e), k
    return pick


def judge(ops, rule):
    base = min(p for k, p, _, _ in ops if k == "alloc")
    live, starts, recent = {}, [], []  # recent: [start, end, newest free's number]
    matched = total = 0
    first = []
    for i, (kind, ptr, n, done) in enumerate(ops):
        off = ptr - base
        if kind == "alloc":
            size = (max(n, 1) + 511) // 512 * 512
            gaps, cur = [], 0
            for s in starts:
                if s > cur:
                    gaps.append((cur, s))
                cur = max(cur, s + live[s])
            pick = None if rule == "bestfit" else best(size, recent, rule != "lowest")
            if pick is None:
                recent[:] = [r for r in recent if r[2] >= done] if rule == "gpu" else []
                pick = best(size, gaps, False)
            choice = pick[0] if pick else cur
            total += 1
            matched += choice == off
            if choice != off and len(first) < 5:
                first.append((i, size, off, choice))
            kept = []
            for a, e, t in recent:  # the GPU's block leaves the tier
                if e <= off or a >= off + size:
                    kept.append((a, e, t))
                else:
                    if a < off:
                        kept.append((a, off, t))
                    if e > off + size:
                        kept.append((off + size, e, t))
            recent[:] = kept
            live[off] = size
            bisect.insort(starts, off)
        else:
            size = live.pop(off)
            starts.pop(bisect.bisect_left(starts, off))
            a, e, t = off, off + size, n
            kept = []
            for x, y, tt in recent:  # merged with the tier's neighbours only; the newest free counts
                if y == a:
                    a, t = x, max(t, tt)
                elif x == e:
                    e, t = y, max(t, tt)
                else:
                    kept.append((x, y, tt))
            kept.append((a, e, t))
            recent[:] = kept
    return matched, total, first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--ops", type=int, default=40000, help="judge the first N pool calls (0: all)")
    ap.add_argument("--rules", default=",".join(RULES))
    a = ap.parse_args()
    ops = load(a.log, a.ops)
    for rule in a.rules.split(","):
        m, t, first = judge(ops, rule)
        print(f"{rule}: {m} of {t} allocations where the GPU put them ({100 * m / t:.2f}%), of the first "
              f"{len(ops)} pool calls", flush=True)
        for i, size, off, choice in first:
            print(f"  call {i}: {size} bytes, GPU at offset {off}, {rule} at {choice}")


if __name__ == "__main__":
    main()
