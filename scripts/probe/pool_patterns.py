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

print("\n".join(out))
