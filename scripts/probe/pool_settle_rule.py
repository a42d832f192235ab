#!/usr/bin/env python3
"""Scores the sim's cudaMemPool placement rule (devices/sim_device.cpp, session 10) against the
H200's recordings, each request judged from the H200's own state (its placements so far, and
for call logs the frees the GPU had reached when the request came, `frees_done`).

    python3 scripts/probe/pool_settle_rule.py results/h200/probe/pool/pool_mix_s?_n3000_l64_r0.csv.gz
    python3 scripts/probe/pool_settle_rule.py --ops 40000 \\
        results/h200/probe/pool/kernels/dynamic_seq_cuda_mempool_calls.csv.gz
    python3 scripts/probe/pool_settle_rule.py results/h200/probe/pool/script/pool_script.csv
    python3 scripts/probe/pool_settle_rule.py --peaks results/h200/probe/pool/pool_mix_s*.csv.gz

The rule: free ranges are in two tiers, each merged only within itself: the frees since the pool
last settled (per stream), and the settled ranges. A request takes the first of
  1. best fit over its stream's recent frees (equal fits: the longest freed; the rest of a
     recent free a request split counts as freed then);
  2. best fit over the settled ranges every 32 MiB granule of which is backed (equal fits: the
     longest settled, then the newest freed);
  3. best fit over the other streams' recent frees;
  4. best fit over every free range, both tiers merged; then the pool settles;
  5. the pool's end; then the pool settles.
Settling moves the recent frees the GPU had reached into the settled tier; a synchronize settles
all. Granules: a request's unbacked 32 MiB granules are backed by moving idle ones (backed, no
live block, no recent free the GPU has not reached), highest first, then by new memory.

Inputs: the probe's op-by-op mixes (`op,kind,slot,bytes,offset,...`; `_sync_` files synchronize
after every free), GMB_CUDA_CALL_LOG call logs (optionally with a `stream` column,
scripts/probe/join_streams.py), and pool_probe's scripted patterns (`pattern,step,kind,...`).
With --misses, every request the rule puts elsewhere; with --peaks, the mixes replayed with the
rule's own decisions: its peak reserved bytes against the H200's.
"""
import csv
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pool_placement as pp  # noqa: E402

END = 1 << 62
GRANULE = 32 << 20
MIB = 1 << 20


def merge(pieces):
    """Merges adjacent pieces [start, end, freed, settled, free_number]; merged: the newest of each."""
    out = []
    for p in sorted(pieces):
        if out and out[-1][1] == p[0]:
            q = out[-1]
            q[1] = p[1]
            q[2], q[3], q[4] = max(q[2], p[2]), max(q[3], p[3]), max(q[4], p[4])
        else:
            out.append(list(p))
    return out


def cut(pieces, start, end, renew=None):
    """Takes [start, end) out of the pieces; what is left of a split one is freed at `renew`."""
    out = []
    for a, b, freed, settled, number in pieces:
        if b <= start or a >= end:
            out.append([a, b, freed, settled, number])
            continue
        freed = freed if renew is None else renew
        if a < start:
            out.append([a, start, freed, settled, number])
        if b > end:
            out.append([end, b, freed, settled, number])
    return out


def best(pieces, size, key):
    fits = [p for p in pieces if p[1] - p[0] >= size]
    return min(fits, key=key)[0] if fits else None


class Pool:
    def __init__(self):
        self.recent = {}  # stream -> pieces
        self.settled = [[0, END, -1, -1, -1]]
        self.backed = set()
        self.live = {}  # slot -> (start, end)
        self.frees = 0  # cudaFreeAsyncs so far: a free's number
        self.now = 0  # the op's index: ages
        self.done = None  # frees the GPU had reached (None: all)

    def all_recent(self):
        return [p for ps in self.recent.values() for p in ps]

    def reached(self, piece):
        return self.done is None or piece[4] < self.done

    def free(self, slot, stream):
        a, b = self.live.pop(slot)
        self.recent[stream] = merge(self.recent.get(stream, []) + [[a, b, self.now, self.now, self.frees]])
        self.frees += 1

    def settle(self, everything=False):
        for stream, pieces in self.recent.items():
            go = [p for p in pieces if everything or self.reached(p)]
            self.recent[stream] = [p for p in pieces if not (everything or self.reached(p))]
            self.settled = merge(self.settled + [[a, b, f, self.now, n] for a, b, f, _, n in go])

    def fully_backed(self, a, b):
        return b < END and all(g in self.backed for g in range(a // GRANULE, (b - 1) // GRANULE + 1))

    def choose(self, size, stream):
        """(offset, tier 1-5) the rule picks."""
        oldest_free = lambda p: (p[1] - p[0], p[2], p[0])  # noqa: E731
        at = best(self.recent.get(stream, []), size, oldest_free)
        if at is not None:
            return at, 1
        backed = [p for p in self.settled if self.fully_backed(p[0], p[1])]
        at = best(backed, size, lambda p: (p[1] - p[0], p[3], -p[2], p[0]))
        if at is not None:
            return at, 2
        others = [p for s, ps in self.recent.items() if s != stream for p in ps]
        at = best(others, size, oldest_free)
        if at is not None:
            return at, 3
        union = merge(self.settled + self.all_recent())
        at = best([p for p in union if p[1] < END], size, oldest_free)
        if at is not None:
            return at, 4
        return next(p[0] for p in union if p[1] >= END), 5

    def tier_of(self, at, size, stream):
        """The tier a placement (the H200's) comes from: for the settles it makes."""
        inside = lambda ps: any(p[0] <= at and at + size <= p[1] for p in ps)  # noqa: E731
        if inside(self.recent.get(stream, [])):
            return 1
        if inside([p for p in self.settled if self.fully_backed(p[0], p[1])]):
            return 2
        if inside([p for s, ps in self.recent.items() if s != stream for p in ps]):
            return 3
        return 4

    def place(self, slot, at, size, tier):
        if tier >= 4:
            self.settle()
        self.live[slot] = (at, at + size)
        for s in self.recent:
            self.recent[s] = cut(self.recent[s], at, at + size, renew=self.now)
        self.settled = cut(self.settled, at, at + size)
        g0, g1 = at // GRANULE, (at + size - 1) // GRANULE
        missing = [g for g in range(g0, g1 + 1) if g not in self.backed]
        if missing:
            busy = {g for a, b in self.live.values() for g in range(a // GRANULE, (b - 1) // GRANULE + 1)}
            busy |= {g for p in self.all_recent() if not self.reached(p)
                     for g in range(p[0] // GRANULE, (p[1] - 1) // GRANULE + 1)}
            idle = sorted((g for g in self.backed if g not in busy and not g0 <= g <= g1), reverse=True)
            self.backed -= set(idle[:len(missing)])
            self.backed |= set(missing)


def requests(path):
    """(kind, slot, bytes, offset, stream, frees_done, pattern) rows; kind alloc/free/sync."""
    if path.endswith(".csv") and not path.endswith(".csv.gz"):
        with open(path) as f:
            for r in csv.DictReader(f):
                kind = {"a": "alloc", "f": "free", "s": "sync"}[r["kind"]]
                yield kind, r["label"], int(r["bytes"]), int(r["offset"]), "0", None, r["pattern"]
        return
    sync = "_sync_" in path
    for r in pp.rows(path):
        yield (r["kind"], r["slot"], int(r["bytes"]), int(r["offset"]), r.get("stream") or "0",
               r.get("frees_done"), None)
        if sync and r["kind"] == "free":
            yield "sync", None, 0, 0, "0", None, None


def score(path, misses=False, own=False):
    """Requests the rule puts where the H200 did, of all; with own, the rule's own decisions
    (returns its peak reserved bytes instead)."""
    pool, pattern, hits, total, peak = Pool(), None, 0, 0, 0
    for i, (kind, slot, nbytes, offset, stream, done, pat) in enumerate(requests(path)):
        if pat != pattern:  # a scripted pattern: a new pool
            pool, pattern = Pool(), pat
        pool.now = i
        if kind == "free":
            pool.free(slot, stream)
            continue
        if kind == "sync":
            pool.settle(everything=True)
            continue
        size = (max(nbytes, 1) + 511) // 512 * 512
        pool.done = int(done) if done not in (None, "") else None
        at, tier = pool.choose(size, stream)
        total += 1
        hits += at == offset
        if misses and at != offset:
            print(f"{path} op {i}{' ' + pattern if pattern else ''}: {size / MIB:g} MiB, rule {at / MIB:g} "
                  f"(tier {tier}), H200 {offset / MIB:g} MiB")
        if own:
            pool.place(slot, at, size, tier)
        else:
            pool.place(slot, offset, size, pool.tier_of(offset, size, stream))
        peak = max(peak, len(pool.backed) * GRANULE)
    return (hits, total) if not own else peak


def h200_peak(path):
    with gzip.open(path, "rt") as f:
        return max(int(r["reserved"]) for r in csv.DictReader(line for line in f if not line.startswith("#")))


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--ops" in args:
        i = args.index("--ops")
        pp.OPS = int(args[i + 1])
        del args[i:i + 2]
    flags = {a for a in args if a.startswith("--")}
    args = [a for a in args if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    hits = total = 0
    for path in args:
        if "--peaks" in flags:
            rule, h200 = score(path, own=True), h200_peak(path)
            print(f"{path}: H200 {h200 >> 20} MiB, rule {rule >> 20} MiB ({100.0 * (rule - h200) / h200:+.1f}%)")
            continue
        h, t = score(path, misses="--misses" in flags)
        hits, total = hits + h, total + t
        print(f"{path}: {h} of {t}")
    if total:
        print(f"all: {hits} of {total}")
