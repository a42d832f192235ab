#!/usr/bin/env python3
"""Writes the scripted cudaMemPool patterns that `pool_probe script FILE` runs on the GPU, each in
a new pool: which free range a request takes right after the pool gave up on the frees since
its last flush (issue 14: the decisions the sim's tier rule misses in the 3000-op mixes).

    python3 scripts/probe/pool_patterns.py > patterns.txt

Sizes in MiB. A new pool places a run of allocations from offset 0 upwards; `s` blocks (1 MiB,
kept live) separate the ranges so that only the frees a pattern names can merge. A request
that no recent free holds and that no old range holds (X, 100 MiB or more) is the flush: the
pool takes the recent frees as completed there.
"""
M = 1 << 20
out = []


def pattern(name, ops):
    out.append(f"pattern {name}")
    for op in ops.split(";"):
        op = op.strip()
        if not op:
            continue
        parts = op.split()
        if parts[0] == "a":
            out.append(f"a {parts[1]} {int(float(parts[2]) * M)}")
        else:
            out.append(op)


def both(name, ops):
    """The pattern, and the same with a synchronize after every free."""
    pattern(name, ops)
    synced = ";".join(op + ("; s" if op.strip().startswith("f ") else "") for op in ops.split(";"))
    pattern(name + "_sync", synced)


# 1. A just-flushed free against an older, tighter hole.
both("flushed_vs_older_hole",
     "a H 4; a s1 1; a C 6; a s2 1; a B 64; a s3 1; f H; f B; a X 100; f C; a Y 10; a Z 3")
both("flushed_vs_older_hole_2flush",
     "a H 4; a s1 1; a C 6; a s2 1; a B 64; a s3 1; f H; f B; a X 100; f C; a Y 10; a W 200; a Z 3")
both("flushed_vs_older_hole_newfree",
     "a H 4; a s1 1; a C 6; a s2 1; a B 64; a s3 1; a D 2; a s4 1; f H; f B; a X 100; f C; a Y 10; f D; a Z 3")
both("flushed_vs_older_hole_nomiss",
     "a H 4; a s1 1; a C 6; a s2 1; a B 64; a s3 1; f H; f B; a X 100; f C; a Z 3")
both("older_hole_twice_flushed",
     "a H 4; a s1 1; a C 6; a s2 1; a B 64; a s3 1; f H; a X 100; f C; a X2 100; f B; a Y 10; a Z 3")
# 2. Does the flushed free merge with the old free ranges beside it for the request that missed?
both("merge_both_sides", "a H 4; a C 6; a R 30; a s 1; f H; f R; a X 100; f C; a Y 10")
both("merge_right_only", "a s0 1; a C 6; a R 30; a s 1; f R; a X 100; f C; a Y 10")
both("merge_left_only", "a H 4; a C 6; a s 1; a B 64; a s2 1; f H; f B; a X 100; f C; a Y 10")
both("merge_left_only_nob", "a H 4; a C 6; a s 1; f H; a X 100; f C; a Y 10")
both("merge_both_sides_small", "a H 4; a C 6; a R 30; a s 1; f H; f R; a X 100; f C; a Y 5")
both("merge_both_sides_big", "a H 4; a C 6; a R 30; a s 1; f H; f R; a X 100; f C; a Y 35")
# 3. The seed-5 ops 113-126 in small: a recent free beside the rest of a flushed one.
both("seed5_ops113_126",
     "a H 4; a C 6; a R 30; a s 1; f H; f R; a X 100; f C; a Y 10; a Z 3; f Y; a W 6")
# 4. Equal standing, old holes only: best fit and the tie.
both("old_best_fit", "a A 8; a s1 1; a B 6; a s2 1; f A; a X 100; f B; a X2 200; a Z 5")
both("old_best_fit_rev", "a A 6; a s1 1; a B 8; a s2 1; f A; a X 100; f B; a X2 200; a Z 5")
# 5. A miss that grows the pool: is the flushed free at the end merged with the new memory?
both("flushed_at_end", "a A 1; f A; a B 118")
both("flushed_at_end_2", "a s 1; a A 5; f A; a B 40")
both("flushed_at_end_live", "a s 1; a A 5; a t 1; f A; a B 40")

# 6. A grid: [s0][H 4][C 6][R 30][s], C freed after the flush X (recent); H and R live, freed
# before X (old) or freed after it (recent); then Y of each size, Z 3 MiB, Y freed, W 6 MiB.
for h in ("live", "old", "recent"):
    for r in ("live", "old", "recent"):
        for y in (2, 5, 8, 10, 12, 20, 35, 38, 41):
            ops = ["a s0 1", "a H 4", "a C 6", "a R 30", "a s 1"]
            ops += [f"f {n}" for n, st in (("H", h), ("R", r)) if st == "old"]
            ops += ["a X 100", "f C"]
            ops += [f"f {n}" for n, st in (("H", h), ("R", r)) if st == "recent"]
            ops += [f"a Y {y}", "a Z 3", "f Y", "a W 6"]
            both(f"grid_h{h}_r{r}_y{y}", "; ".join(ops))

# 7. How long the frees of the last flush keep a tier of their own: [s0][H 4][C 6][R 30][s]
# [K 20][s'] with H, R, K old; C freed, Y 8 MiB misses (C joins the tier of the last flush,
# Y takes R's start); then an event; then Z 3 MiB: C's start if C still has its tier, H's if not.
events = {
    "none": "",
    "free_other": "f E",
    "alloc_from_old": "a Q 15",
    "free_alloc_recent": "f E; a Q 1",
    "miss_grow": "a Q 200",
    "miss_old": "f E; a Q 12",
    "sync": "s",
    "two_allocs_old": "a Q 5; a Q2 5",
}
for ev, ops in events.items():
    pattern(f"tier_life_{ev}", "a s0 1; a H 4; a C 6; a R 30; a s 1; a K 20; a s2 1; a E 1; a s3 1; "
            f"f H; f R; f K; a X 100; f C; a Y 8; {ops}; a Z 3")
# 8. The old range that lost an idle granule (merge_left_only): the same with B smaller than a
# granule, and with B 64 MiB but no growth after it (the flush a request that an old range holds).
both("merge_left_only_b20", "a H 4; a C 6; a s 1; a B 20; a s2 1; f H; f B; a X 100; f C; a Y 10")
both("merge_left_only_b64_nogrow", "a H 4; a C 6; a s 1; a B 64; a s2 1; a G 120; a s3 1; f G; a X 100; "
     "f H; f B; a X2 110; f C; a Y 10")
both("flushed_vs_older_hole_b20",
     "a H 4; a s1 1; a C 6; a s2 1; a B 20; a s3 1; f H; f B; a X 100; f C; a Y 10; a Z 3")
# 9. The rest of a recent free beside an old range, then requests the old range alone holds or not.
for w in (6, 20, 29, 30, 31, 33):
    both(f"rest_beside_old_w{w}", f"a s0 1; a C 5; a R 30; a s 1; f R; a X 100; f C; a Y 3; a W {w}")
    both(f"rest_beside_old_free_w{w}", f"a s0 1; a C 5; a R 30; a s 1; a E 1; a s2 1; f R; a X 100; f C; a Y 3; f E; a W {w}")

print("\n".join(out))
