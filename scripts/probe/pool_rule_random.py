#!/usr/bin/env python3
"""Random cudaMemPool op sequences placed by scripts/probe/pool_settle_rule.py's own decisions:
the reference the sim's pool model (devices/sim_device.cpp) is held to op by op
(`SimMemPool.RandomOpsMakeTheScriptsEveryDecision`).

    python3 scripts/probe/pool_rule_random.py | gzip -9n > tests/data/pool_rule_random.csv.gz

Each pattern is a new pool with its own sizes (sets of equal sizes, so that equal fits are
common), 1-3 streams, a synchronize rate, a bound on live blocks, and frees sometimes on another
stream than the allocation's. Rows: pattern,kind (a/f/s),label,bytes,stream,offset (an
allocation's, from the pool's start),reserved (after the op). No kernels: every free is reached.
"""
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pool_settle_rule as rule  # noqa: E402

MIB = 1 << 20
SIZES = [[MIB, 2 * MIB, 4 * MIB], [MIB, 3 * MIB], [MIB, 2 * MIB, 3 * MIB, 5 * MIB, 8 * MIB],
         [10 * MIB, 20 * MIB, 30 * MIB, 40 * MIB], [512, 1024, 1536, 2048],
         [16 * MIB, 32 * MIB, 48 * MIB, 64 * MIB, 96 * MIB]]


def pattern(seed, ops, out):
    rng = random.Random(seed)
    sizes, streams = rng.choice(SIZES), rng.choice([1, 2, 3])
    sync, max_live = rng.choice([0, 0, 0.005, 0.02]), rng.choice([5, 10, 20, 60])
    pool, live, label = rule.Pool(), {}, 0
    for i in range(ops):
        pool.now = i
        x = rng.random()
        if x < sync:
            pool.settle(everything=True)
            row = ("s", "", 0, 0, 0)
        elif live and (x < 0.5 or len(live) > max_live):
            slot = rng.choice(sorted(live))
            stream = live.pop(slot)
            if rng.random() < 0.1:  # freed on another stream than its allocation's
                stream = rng.randrange(streams)
            pool.free(slot, stream)
            row = ("f", slot, 0, stream, 0)
        else:
            stream, nbytes = rng.randrange(streams), rng.choice(sizes) - 512 * rng.randrange(2)
            nbytes = max(nbytes, 1)
            size = (nbytes + 511) // 512 * 512
            at, tier = pool.choose(size, stream)
            pool.place(label, at, size, tier)
            live[label] = stream
            row = ("a", label, nbytes, stream, at)
            label += 1
        out.write(f"{seed},{row[0]},{row[1]},{row[2]},{row[3]},{row[4]},{len(pool.backed) * rule.GRANULE}\n")


if __name__ == "__main__":
    sys.stdout.write("pattern,kind,label,bytes,stream,offset,reserved\n")
    for seed in range(1, 17):
        pattern(seed, 1500, sys.stdout)
