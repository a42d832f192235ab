#!/usr/bin/env python3
"""Writes a synthetic native-CSV allocation trace for speed and memory measurements.

    scripts/gen_trace.py EVENTS OUT.csv [--live N] [--seed S]

A ring of N buffer slots (default 1024): each step frees the oldest live buffer of a slot and
allocates a new one there, sizes drawn from a mix of small (512 B-1 MiB) and a few large
(2-64 MiB) requests over two streams, so the live set stays bounded and a caching allocator
mostly reuses its cache. Ids are reused once freed. Deterministic for a seed.
"""
import argparse
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("events", type=int)
    ap.add_argument("out")
    ap.add_argument("--live", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    small = [512 * (1 << k) for k in range(12)]  # 512 B .. 1 MiB
    large = [(2 << 20) * (1 << k) for k in range(6)]  # 2 .. 64 MiB
    sizes = [rng.choice(large) if rng.random() < 0.03 else rng.choice(small) + rng.randrange(0, 512)
             for _ in range(4096)]
    live = [False] * a.live
    lines = ["action,id,bytes,stream\n"]
    written = 0
    i = 0
    with open(a.out, "w") as f:
        f.write(lines[0])
        buf = []
        while written < a.events:
            slot = i % a.live
            stream = (i >> 3) & 1
            if live[slot]:
                buf.append(f"free,{slot},,{stream}\n")
                live[slot] = False
            else:
                buf.append(f"alloc,{slot},{sizes[(i * 2654435761) % 4096]},{stream}\n")
                live[slot] = True
                i += 1 if rng.random() < 0.5 else 0
            written += 1
            if not live[slot]:
                i += 1
            if len(buf) >= 65536:
                f.write("".join(buf))
                buf.clear()
        f.write("".join(buf))


if __name__ == "__main__":
    main()
