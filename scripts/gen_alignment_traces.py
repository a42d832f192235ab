#!/usr/bin/env python3
"""Traces for claim C15 ("aligning sizes to 512 bytes or 1 KB reduces internal fragmentation").

The same seeded sequence of allocations and frees, three times: sizes as drawn (odd byte
counts), rounded up to 512 B, and rounded up to 1 KiB. Sizes are a mix of small tensors
(1 B .. 1 MiB) and medium ones (1 .. 64 MiB), with a drifting live set.

    python3 scripts/gen_alignment_traces.py configs/traces/alignment
"""
import os
import random
import sys


def events(seed=7, n=6000):
    rng = random.Random(seed)
    live, out, next_id = [], [], 0
    for _ in range(n):
        if live and (len(live) > 400 or rng.random() < 0.45):
            i = live.pop(rng.randrange(len(live)))
            out.append(("free", i, None))
        else:
            if rng.random() < 0.8:
                size = int(2 ** rng.uniform(0, 20))          # 1 B .. 1 MiB
            else:
                size = int(2 ** rng.uniform(20, 26))         # 1 .. 64 MiB
            size = max(1, size | 1)                          # an odd byte count
            out.append(("alloc", next_id, size))
            live.append(next_id)
            next_id += 1
    return out


def write(path, evs, align):
    with open(path, "w") as f:
        f.write("action,id,bytes,stream\n")
        for action, i, size in evs:
            if action == "alloc":
                if align:
                    size = (size + align - 1) // align * align
                f.write(f"alloc,{i},{size},0\n")
            else:
                f.write(f"free,{i},,0\n")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "configs/traces/alignment"
    os.makedirs(out, exist_ok=True)
    evs = events()
    write(os.path.join(out, "odd_sizes.csv"), evs, 0)
    write(os.path.join(out, "aligned_512.csv"), evs, 512)
    write(os.path.join(out, "aligned_1k.csv"), evs, 1024)


if __name__ == "__main__":
    main()
