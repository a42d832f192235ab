#!/usr/bin/env python3
"""How much one placement decision moves a cudaMemPool mix's peak reserved bytes.

    python3 scripts/probe/pool_peak_sensitivity.py results/h200/probe/pool/pool_mix_s?_n3000_l64_r0.csv.gz

For each recorded H200 mix (results/h200/probe/pool/, one stream, no kernels) it replays the ops
with the sim's placement rule (`tiered_oldest` of pool_placement.py: the recent-free tier, best
fit, equal fits to the longest freed) and the sim's granule rule (a request's unbacked 32 MiB
granules are backed by moving idle granules first, highest first, then by new memory), as the
simulated device does on these mixes, and prints:
  - the H200's peak and the rule's (the sim's figure: SimMemPool.RecordedMixes* in CI);
  - for each decision the rule gets wrong judged from the H200's own state
    (`pool_placement.py --misses`), the peak when that one decision alone is given the H200's
    offset and the rule makes every other: the spread of these is how far a single decision
    moves the peak.
Given the H200's offset at every op the granule rule gives its reserved bytes after every op
(checked first; a mismatch stops the script).
"""
import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pool_placement as pp  # noqa: E402

GRANULE = 32 << 20


def union(free, recent):
    merged = [list(x) for x in free]
    for a, b, t in recent:
        pp.add(merged, a, b, t)
    return merged


def replay(rows, oracle=frozenset(), check=False):
    """Peak reserved bytes with the rule's placements, the H200's at the ops in `oracle`."""
    live, free, recent, backed, peak = {}, [[0, pp.END, -1]], [], set(), 0
    for r in rows:
        op = int(r["op"])
        if r["kind"] == "free":
            s, e = live.pop(r["slot"])
            pp.add(recent, s, e, op)
            continue
        size = (max(int(r["bytes"]), 1) + 511) // 512 * 512
        at = pp.best_fit(recent, size, True)
        if at is None:  # no recent free holds it: they join the rest
            for a, b, t in recent:
                pp.add(free, a, b, t)
            recent = []
            at = pp.best_fit(free, size, True)
        if op in oracle:
            h200 = int(r["offset"])
            # The H200's offset where it is free in this state (the ranges merged across tiers).
            if any(a <= h200 and h200 + size <= b for a, b, _ in union(free, recent)):
                at = h200
        live[r["slot"]] = (at, at + size)
        pp.take(recent, at, at + size)
        pp.take(free, at, at + size)
        g0, g1 = at // GRANULE, (at + size - 1) // GRANULE
        missing = [g for g in range(g0, g1 + 1) if g not in backed]
        if missing:
            busy = {g for s, e in live.values() for g in range(s // GRANULE, (e - 1) // GRANULE + 1)}
            idle = sorted((g for g in backed if g not in busy and not g0 <= g <= g1), reverse=True)
            for g in idle[:len(missing)]:
                backed.discard(g)
            backed.update(missing)
        reserved = len(backed) * GRANULE
        if check and reserved != int(r["reserved"]):
            sys.exit(f"op {op}: granule rule {reserved} bytes reserved, the H200 {r['reserved']}")
        peak = max(peak, reserved)
    return peak


def main(paths):
    for path in paths:
        rows = pp.rows(path)
        every = frozenset(int(r["op"]) for r in rows if r["kind"] == "alloc")
        h200 = max(int(r["reserved"]) for r in rows)
        if replay(rows, every, check=True) != h200:
            sys.exit(f"{path}: the H200's placements do not give its peak")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            pp.score(path, "tiered_oldest", misses=True)
        misses = [int(line.split(" op ")[1].split(":")[0]) for line in out.getvalue().splitlines() if " op " in line]
        rule = replay(rows)
        peaks = [replay(rows, frozenset([m])) for m in misses]
        pct = lambda x: 100.0 * (x - h200) / h200  # noqa: E731
        mib = lambda x: x >> 20  # noqa: E731
        line = f"{os.path.basename(path)}: H200 {mib(h200)} MiB, rule {mib(rule)} MiB ({pct(rule):+.1f}%); "
        if peaks:
            line += (f"{len(misses)} decisions missed; one of them given the H200's offset: "
                     f"{mib(min(peaks))}..{mib(max(peaks))} MiB ({pct(min(peaks)):+.1f}% .. {pct(max(peaks)):+.1f}%), "
                     f"the rule's peak in {sum(p == rule for p in peaks)}")
        else:
            line += "no decision missed"
        print(line)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
