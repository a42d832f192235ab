#!/usr/bin/env python3
"""Replays the H200's cudaMalloc/cudaFree mixes (results/h200/probe/pool/malloc_mix_*.csv.gz,
written by scripts/probe/pool_probe.cu malloc_mix) through candidate placement rules and counts,
per file, the pointers (as offsets from the first one) and the device memory in use
(cudaMemGetInfo's free at start minus free after the op) that each rule gives after every op.

    python3 scripts/probe/malloc_placement.py results/h200/probe/pool/malloc_mix_s*.csv.gz

Every rule shares the part the H200 probe had already settled (devices/sim_malloc_model.h):
VA regions of the request rounded up to 32 MiB, placed top-down; carving newest region first,
best fit, from the low end; the fresh context's three regions. The rules differ in the small
requests packed into shared 2 MiB pages:

  limit   the largest request packed (1 MiB: the old model; 2 MiB - 1)
  fit     which free range of which page a packed request takes: `first` (pages by creation,
          ranges by address), `best_addr` (smallest range, lowest address among equals),
          `best_oldest` (smallest range, the one longest free among equals), `best_newest`
  merge   a freed range merged with free neighbours counts as freed `now`, or keeps the `oldest`
          of their ages
  split   what is left of a range an allocation was carved from keeps its age (`keep`) or counts
          as new (`now`)

A page is placed like a 2 MiB cudaMalloc and released when its last allocation is freed. The
winning rule's tie count (packed requests with more than one smallest range, and in how many the
oldest is not the lowest) is printed last."""
import gzip
import itertools
import sys

MiB = 1 << 20
PAGE = 2 * MiB
REGION = 32 * MiB
TOP = 1 << 46  # any address: only offsets from the first pointer are compared


def ru(n, step):
    return (n + step - 1) // step * step


class Sim:
    def __init__(self, limit, fit, merge, split):
        self.limit, self.fit, self.merge, self.split = limit, fit, merge, split
        self.regions = {}  # base -> [size, created, {offset: length}, live, pinned]
        self.created = 0
        self.clock = 0
        self.used = 0
        self.pages = []  # [base, {offset: (length, freed_at)}, live]
        self.small = {}  # pointer -> rounded size
        self.large = {}
        self.ties = self.ties_not_lowest = 0
        for n in (8 * MiB, 64 * MiB, 414 * MiB):  # the context's own regions
            self.place(n)
        for r in self.regions.values():
            r[4] = True

    def tick(self):
        self.clock += 1
        return self.clock

    def place(self, size):
        for base, r in sorted(self.regions.items(), key=lambda kv: -kv[1][1]):
            fits = [(length, off) for off, length in r[2].items() if length >= size]
            if not fits:
                continue
            length, off = min(fits)
            del r[2][off]
            if length > size:
                r[2][off + size] = length - size
            r[3] += 1
            return base + off
        size_r = ru(size, REGION)
        top, base = TOP, None
        for b in sorted(self.regions, reverse=True):
            end = b + self.regions[b][0]
            if top > end and top - end > size_r:
                base = top - size_r
                break
            top = min(top, b)
        if base is None:
            base = top - size_r
        self.created += 1
        self.regions[base] = [size_r, self.created, {size: size_r - size} if size_r > size else {}, 1, False]
        return base

    def unplace(self, ptr, size):
        base = max(b for b in self.regions if b <= ptr)
        r = self.regions[base]
        off, start, length = ptr - base, ptr - base, size
        if off + size in r[2]:
            length += r[2].pop(off + size)
        for o, l in list(r[2].items()):
            if o + l == off:
                start, length = o, length + l
                del r[2][o]
                break
        r[2][start] = length
        r[3] -= 1
        if r[3] == 0 and not r[4]:
            del self.regions[base]

    def malloc(self, n):
        if n <= self.limit:
            return self.malloc_small(n)
        size = ru(n, PAGE)
        p = self.place(size)
        self.used += size
        self.large[p] = size
        return p

    def free(self, p):
        if p in self.large:
            size = self.large.pop(p)
            self.used -= size
            self.unplace(p, size)
        else:
            self.free_small(p)

    def malloc_small(self, n):
        size = ru(n, 512)
        cands = []
        for order, page in enumerate(self.pages):
            for off, (length, freed_at) in page[1].items():
                if length >= size:
                    cands.append((length, freed_at, page[0] + off, order, page, off))
        if cands:
            key = {
                "first": lambda c: (c[3], c[2]),
                "best_addr": lambda c: (c[0], c[2]),
                "best_oldest": lambda c: (c[0], c[1]),
                "best_newest": lambda c: (c[0], -c[1]),
            }[self.fit]
            chosen = min(cands, key=key)
            smallest = [c for c in cands if c[0] == chosen[0]]
            if len(smallest) > 1:
                self.ties += 1
                self.ties_not_lowest += chosen[2] != min(c[2] for c in smallest)
            length, freed_at, _, _, page, off = chosen
            del page[1][off]
            if length > size:
                page[1][off + size] = (length - size, freed_at if self.split == "keep" else self.tick())
            page[2] += 1
            self.small[page[0] + off] = size
            return page[0] + off
        self.used += PAGE
        base = self.place(PAGE)
        self.pages.append([base, {size: (PAGE - size, self.tick())} if PAGE > size else {}, 1])
        self.small[base] = size
        return base

    def free_small(self, p):
        size = self.small.pop(p)
        for i, page in enumerate(self.pages):
            if not page[0] <= p < page[0] + PAGE:
                continue
            ranges, off = page[1], p - page[0]
            start, length, ages = off, size, []
            if off + size in ranges:
                l2, t2 = ranges.pop(off + size)
                length += l2
                ages.append(t2)
            for o, (l, t) in list(ranges.items()):
                if o + l == off:
                    start, length = o, length + l
                    ages.append(t)
                    del ranges[o]
                    break
            ranges[start] = (length, self.tick() if self.merge == "now" or not ages else min(ages))
            page[2] -= 1
            if page[2] == 0:
                self.used -= PAGE
                self.unplace(page[0], PAGE)
                del self.pages[i]
            return


def load(path):
    start, ops = None, []
    with gzip.open(path, "rt") as f:
        for line in f:
            line = line.strip()
            if line.startswith("op,"):
                continue
            if line.startswith("#"):
                start = int(line.split()[-1])  # "# start device_free N"
                continue
            _, kind, slot, size, ptr, free = line.split(",")
            ops.append((kind, int(slot), int(size), int(ptr, 16), int(free)))
    return start, ops


def replay(path, rule):
    start, ops = load(path)
    sim = Sim(*rule)
    live, first_gpu, first_sim = {}, None, None
    offsets = used = allocs = 0
    first_miss = None
    peak_gpu = peak_sim = 0
    for i, (kind, slot, size, ptr, free) in enumerate(ops):
        if kind == "alloc":
            p = sim.malloc(size)
            live[slot] = p
            if first_gpu is None:
                first_gpu, first_sim = ptr, p
            allocs += 1
            if ptr - first_gpu == p - first_sim:
                offsets += 1
            elif first_miss is None:
                first_miss = i
        else:
            sim.free(live.pop(slot))
        used += start - free == sim.used
        peak_gpu, peak_sim = max(peak_gpu, start - free), max(peak_sim, sim.used)
    return offsets, allocs, used, len(ops), peak_gpu, peak_sim, first_miss, sim


def main(paths):
    if not paths:
        sys.exit(__doc__)
    # (1 MiB, first, ...) is the old model.
    rules = list(itertools.product([MiB, 2 * MiB - 1], ["first", "best_addr", "best_oldest", "best_newest"],
                                    ["now", "oldest"], ["keep", "now"]))
    best = None
    for rule in rules:
        tot_off = tot_allocs = tot_used = tot_ops = 0
        cells = []
        for path in paths:
            off, allocs, used, n, pg, ps, miss, _ = replay(path, rule)
            tot_off, tot_allocs, tot_used, tot_ops = tot_off + off, tot_allocs + allocs, tot_used + used, tot_ops + n
            cells.append(f"{off}/{allocs}" + ("" if pg == ps else f" peak{(ps - pg) // MiB:+d}MiB"))
        name = f"limit={rule[0]} fit={rule[1]} merge={rule[2]} split={rule[3]}"
        print(f"{name:55s} offsets {tot_off}/{tot_allocs}  used {tot_used}/{tot_ops}  | " + ", ".join(cells))
        if best is None or (tot_off, tot_used) > best[0]:
            best = ((tot_off, tot_used), rule)
    print(f"\nbest: limit={best[1][0]} fit={best[1][1]} merge={best[1][2]} split={best[1][3]}")
    for path in paths:
        off, allocs, used, n, pg, ps, miss, sim = replay(path, best[1])
        print(f"  {path}: offsets {off} of {allocs}, used bytes {used} of {n} ops, peak H200 {pg} sim {ps}"
              + (f", first differing op {miss}" if miss is not None else "")
              + f"; packed requests with several smallest ranges {sim.ties}, oldest not the lowest {sim.ties_not_lowest}")


if __name__ == "__main__":
    main(sys.argv[1:])
