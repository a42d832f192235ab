#!/usr/bin/env python3
"""Judge the sim's cudaMemPool placement rule against a pool call log recorded on the GPU.

    python3 scripts/probe/pool_calls_judge.py results/h200/probe/pool/kernels/dynamic_seq_cuda_mempool_calls.csv.gz [--ops 40000]

The log is GMB_CUDA_CALL_LOG's (call,bytes,ok,wait_us,call_us,ptr,pool_reserved; malloc_async and
free_async rows). The state follows the GPU's own placements; at each cudaMallocFromPoolAsync it
asks where each rule would have put the request, and counts how often that is where the GPU put
it. Rules (devices/sim_device.cpp states the sim's):
  sim      the recent-free tier: best fit among the ranges freed since the tier was last
           flushed (merged only with each other); when none holds the request, flush the tier and
           place best fit over every free range; the end of the pool when none holds it.
  bestfit  best fit over every free range, the end of the pool when none holds it.
Requests are rounded up to 512 bytes; best fit is the smallest range that holds the request,
the lowest of equal ones, from its low end. Prints the counts and the first differing decisions.
"""
import argparse
import bisect
import csv
import gzip


def load(path, limit):
    ops, live = [], {}
    with gzip.open(path, "rt") as f:
        for row in csv.DictReader(f):
            if row["call"] not in ("malloc_async", "free_async") or row["ok"] != "1":
                continue
            ptr = int(row["ptr"], 16)
            if row["call"] == "malloc_async":
                ops.append(("alloc", ptr, int(row["bytes"])))
                live[ptr] = True
            else:
                ops.append(("free", ptr, 0))
                live.pop(ptr, None)
            if limit and len(ops) >= limit:
                break
    return ops


def best(size, ranges):
    pick = None
    for a, e in ranges:
        if e - a >= size and (pick is None or (e - a, a) < (pick[1] - pick[0], pick[0])):
            pick = (a, e)
    return pick


def judge(ops, rule):
    base = min(p for k, p, _ in ops if k == "alloc")
    live, starts, recent = {}, [], []
    matched = total = 0
    first = []
    for i, (kind, ptr, nbytes) in enumerate(ops):
        off = ptr - base
        if kind == "alloc":
            size = (max(nbytes, 1) + 511) // 512 * 512
            gaps, cur = [], 0
            for s in starts:
                if s > cur:
                    gaps.append((cur, s))
                cur = max(cur, s + live[s])
            tail = cur
            pick = best(size, recent) if rule == "sim" else None
            if pick is None:
                if rule == "sim":
                    recent.clear()
                pick = best(size, gaps)
            choice = pick[0] if pick else tail
            total += 1
            matched += choice == off
            if choice != off and len(first) < 5:
                first.append((i, size, off, choice))
            kept = []
            for a, e in recent:  # the GPU's block leaves the tier
                if e <= off or a >= off + size:
                    kept.append((a, e))
                else:
                    if a < off:
                        kept.append((a, off))
                    if e > off + size:
                        kept.append((off + size, e))
            recent[:] = kept
            live[off] = size
            bisect.insort(starts, off)
        else:
            size = live.pop(off)
            starts.pop(bisect.bisect_left(starts, off))
            a, e = off, off + size
            kept = []
            for x, y in recent:  # merged with the tier's neighbours only
                if y == a:
                    a = x
                elif x == e:
                    e = y
                else:
                    kept.append((x, y))
            kept.append((a, e))
            recent[:] = kept
    return matched, total, first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--ops", type=int, default=40000, help="judge the first N pool calls (0: all)")
    a = ap.parse_args()
    ops = load(a.log, a.ops)
    for rule in ("sim", "bestfit"):
        m, t, first = judge(ops, rule)
        print(f"{rule}: {m} of {t} allocations where the GPU put them ({100 * m / t:.1f}%), first calls "
              f"judged: {len(ops)}")
        for i, size, off, choice in first:
            print(f"  call {i}: {size} bytes, GPU at offset {off}, {rule} at {choice}")


if __name__ == "__main__":
    main()
