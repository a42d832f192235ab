#!/usr/bin/env python3
"""Counts how many of the H200's cudaMemPool placements a rule predicts, from the op-by-op
probe files (results/h200/probe/pool/pool_mix_*.csv.gz), each judged from the H200's own state.

    python3 scripts/probe/pool_placement.py results/h200/probe/pool/pool_mix_s*_r0.csv.gz
    python3 scripts/probe/pool_placement.py --ops 40000 \
        results/h200/probe/pool/kernels/dynamic_seq_cuda_mempool_calls.csv.gz

Rules: `best` (best fit over every free range, the lowest of equal fits), `tiered` (best fit
first over the ranges freed since the frees last completed, merged only with each other; when
none holds the request, all of them count as completed and best fit runs over every free range)
`tiered_oldest` (`tiered`, but of equal fits the one whose newest free is the oldest: the
sim's rule) and, for call logs that have `frees_done`, `tiered_gpu` (`tiered_oldest`, but when
none of the recent frees holds a request only those the GPU had reached leave the tier: an
event after each cudaFreeAsync, queried when the request was made). Synchronized files (`_sync_`) complete every free at once. A pool call log of
GMB_CUDA_CALL_LOG (header `call,bytes,ok,...,ptr,...`: a run with kernels) is read as the same
ops, offsets from its lowest pointer; --ops N judges only its first N calls. When the rows carry
a `stream` column (scripts/probe/join_streams.py), each stream has its own recent frees, and the
tiered rules search the request's own stream's first, then the other streams' (with --one-tier,
all of them in one search). With --misses,
prints every allocation `tiered_oldest` gets wrong: the request, the guess, the H200's offset and
the free range that holds it."""
import csv
import gzip
import sys

END = 1 << 62  # the pool's unbounded tail
RULES = ("best", "tiered", "tiered_oldest", "tiered_gpu")


OPS = 0  # --ops: how many calls of a call log to judge (0: all)
ONE_TIER = False  # --one-tier: one search over every stream's recent frees


def rows(path):
    with gzip.open(path, "rt") as f:
        table = list(csv.DictReader(line for line in f if not line.startswith("#")))
    if not table or "call" not in table[0]:
        return table
    # A call log: the pool's successful cudaMallocFromPoolAsync / cudaFreeAsync, as probe rows.
    ops, slot_of, slots = [], {}, 0
    for r in table:
        if r["call"] not in ("malloc_async", "free_async") or r["ok"] != "1":
            continue
        ptr = int(r["ptr"], 16)
        if r["call"] == "malloc_async":
            slots += 1
            slot_of[ptr] = str(slots)
            ops.append({"op": str(len(ops)), "kind": "alloc", "slot": str(slots), "bytes": r["bytes"], "offset": ptr,
                        "frees_done": r.get("frees_done"), "stream": r.get("stream") or "0"})
        else:
            ops.append({"op": str(len(ops)), "kind": "free", "slot": slot_of.pop(ptr), "bytes": "0", "offset": "-1",
                        "stream": r.get("stream") or "0"})
        if OPS and len(ops) >= OPS:
            break
    base = min(o["offset"] for o in ops if o["kind"] == "alloc")
    for o in ops:
        if o["kind"] == "alloc":
            o["offset"] = str(o["offset"] - base)
    return ops


def add(ranges, start, end, freed):
    """Adds [start, end) freed at op `freed`; a merged range is as old as its newest free."""
    ranges.append([start, end, freed])
    ranges.sort()
    merged = []
    for a, b, t in ranges:
        if merged and merged[-1][1] == a:
            merged[-1][1] = b
            merged[-1][2] = max(merged[-1][2], t)
        else:
            merged.append([a, b, t])
    ranges[:] = merged


def take(ranges, start, end):
    out = []
    for a, b, t in ranges:
        if b <= start or a >= end:
            out.append([a, b, t])
            continue
        if a < start:
            out.append([a, start, t])
        if b > end:
            out.append([end, b, t])
    ranges[:] = out


def best_fit(ranges, size, oldest):
    fits = [(b - a, t if oldest else 0, a) for a, b, t in ranges if b - a >= size]
    return min(fits)[2] if fits else None


def holder(ranges, offset):
    return next(((a, b, t) for a, b, t in ranges if a <= offset < b), None)


def score(path, rule, misses=False):
    sync = "_sync_" in path
    oldest = rule in ("tiered_oldest", "tiered_gpu")
    # recent: stream -> its recent frees (merged only with each other); one stream unless the
    # rows carry a `stream` column (a call log joined with the run's streams).
    live, free, recent, hits, total = {}, [[0, END, -1]], {}, 0, 0
    free_number = {}  # op of a free -> how many frees came before it (what frees_done counts)
    for r in rows(path):
        op = int(r["op"])
        stream = r.get("stream") or "0"
        if r["kind"] == "free":
            free_number[op] = len(free_number)
            s, e = live.pop(r["slot"])
            add(recent.setdefault(stream, []), s, e, op)
            if sync or rule == "best":
                for a, b, t in recent.pop(stream):
                    add(free, a, b, t)
            continue
        size = (max(int(r["bytes"]), 1) + 511) // 512 * 512
        everyone = [list(x) for ranges in recent.values() for x in ranges]
        before = everyone
        # The request's own stream first, then the other streams' recent frees (--one-tier: all
        # streams' in one search, the sim's rule before session 9).
        if ONE_TIER:
            guess = best_fit(everyone, size, oldest)
        else:
            guess = best_fit(recent.get(stream, []), size, oldest)
            if guess is None:
                guess = best_fit([x for st, ranges in recent.items() if st != stream for x in ranges], size, oldest)
        tier = "recent"
        if guess is None:
            tier = "all"
            done = r.get("frees_done")
            for st in list(recent):
                if rule == "tiered_gpu" and done not in (None, ""):  # the frees the GPU had not reached stay
                    stay = [x for x in recent[st] if free_number[x[2]] >= int(done)]
                    leave = [x for x in recent[st] if free_number[x[2]] < int(done)]
                else:
                    stay, leave = [], recent[st]
                for a, b, t in leave:
                    add(free, a, b, t)
                recent[st] = stay
            guess = best_fit(free + [x for ranges in recent.values() for x in ranges], size, oldest)
        actual = int(r["offset"])
        total += 1
        hits += guess == actual
        if misses and guess != actual:
            held = holder(before, actual)
            kind = "recent" if held else "free"
            held = held or holder(free, actual)
            print(f"{path} op {op}: {size} B, guess {guess} ({tier} tier), H200 {actual}: in a {kind} range "
                  f"[{held[0]}, +{held[1] - held[0]}) freed at op {held[2]}")
        live[r["slot"]] = (actual, actual + size)
        for ranges in recent.values():
            take(ranges, actual, actual + size)
        take(free, actual, actual + size)
    return hits, total


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--ops" in args:
        i = args.index("--ops")
        OPS = int(args[i + 1])
        del args[i:i + 2]
    misses = "--misses" in args
    ONE_TIER = "--one-tier" in args
    args = [a for a in args if a not in ("--misses", "--one-tier")]
    if misses:
        for path in args:
            score(path, "tiered_oldest", misses=True)
        sys.exit(0)
    sums = {rule: [0, 0] for rule in RULES}
    for path in args:
        line = [path]
        for rule in sums:
            h, t = score(path, rule)
            sums[rule][0] += h
            sums[rule][1] += t
            line.append(f"{rule} {h}/{t}")
        print("  ".join(line))
    print("  ".join(["all"] + [f"{rule} {h}/{t}" for rule, (h, t) in sums.items()]))
