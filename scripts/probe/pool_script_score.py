#!/usr/bin/env python3
"""Scores the sim's cudaMemPool placement rule on the scripted H200 patterns
(results/h200/probe/pool/script/pool_script.csv, written by `pool_probe script`), each decision
judged from the H200's own state, and prints every pattern where the rule misses.

    python3 scripts/probe/pool_script_score.py results/h200/probe/pool/script/pool_script.csv

The rule is pool_placement.py's `tiered_oldest` (the sim's, without kernels): the frees since the
last flush form a tier of their own, merged only with each other, searched first by best fit (of
equal fits the one freed longest ago); a request that none of them holds is the flush: they join
the other free ranges, merged, and best fit runs over all of them. A stream synchronize (`s`)
completes every free.
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pool_placement as pp  # noqa: E402

MIB = 1 << 20


def predict(ops):
    """The rule's offset for every allocation of one pattern, given the H200's placements."""
    live, free, recent, guesses = {}, [[0, pp.END, -1]], [], {}
    for i, r in enumerate(ops):
        if r["kind"] == "f":
            s, e = live.pop(r["label"])
            pp.add(recent, s, e, i)
        elif r["kind"] == "s":
            for a, b, t in recent:
                pp.add(free, a, b, t)
            recent = []
        elif int(r["offset"]) >= 0:
            size = (int(r["bytes"]) + 511) // 512 * 512
            guess = pp.best_fit(recent, size, True)
            if guess is None:
                for a, b, t in recent:
                    pp.add(free, a, b, t)
                recent = []
                guess = pp.best_fit(free, size, True)
            guesses[i] = guess
            at = int(r["offset"])
            live[r["label"]] = (at, at + size)
            pp.take(recent, at, at + size)
            pp.take(free, at, at + size)
    return guesses


def main(path):
    patterns = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            patterns.setdefault(r["pattern"], []).append(r)
    hits = total = 0
    for name, ops in patterns.items():
        guesses = predict(ops)
        line, missed = [], False
        for i, r in enumerate(ops):
            if r["kind"] == "f":
                line.append("f" + r["label"])
            elif r["kind"] == "s":
                line.append("s")
            else:
                at = int(r["offset"])
                total += 1
                hits += guesses.get(i) == at
                note = ""
                if guesses.get(i) != at:
                    missed = True
                    note = f"(rule {guesses[i] / MIB:g})"
                line.append(f"{r['label']}@{at / MIB:g}{note}")
        if missed:
            print(f"{name}: {' '.join(line)}")
    print(f"the rule's choice for {hits} of {total} allocations (offsets in MiB)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
