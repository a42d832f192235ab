#!/usr/bin/env python3
"""The simulated device's steps/s against the H200's, per allocator, from committed results.

    python3 scripts/sim_vs_h200.py [--sim results/sim] [--gpu results/h200] [--out results/h200/sim_vs_h200.md]

Reads {dynamic,fixed}_seq/results.json under both folders (the sim runs: `gpumembench --device sim
--config configs/NAME.yaml --output results/sim/NAME`), pairs the cases by allocator label and
writes a Markdown table: steps/s on each (sim figures are modeled), their ratio, whether it is
within +-25%, each allocator's rank by steps/s on each device, and peak reserved bytes. Ranks:
1 is the fastest. The ranking is said to agree when the sim orders every pair of allocators the
same way as the H200, leaving out the pairs that are tied on the H200 (within 3%: two H200 runs
of the same case differ by up to 1.4% on fixed_seq and 7.5% on dynamic_seq, results/h200/*/rerun_66bb493/)
and the pairs that did not run the same steps on one of the devices (an OOM stopped one of them
earlier: their steps/s are over different batches).
"""
import argparse
import json
import os
import sys

CONFIGS = ["dynamic_seq", "fixed_seq"]
TIE = 0.03
BAND = 0.25


def load(folder, cfg):
    path = os.path.join(folder, cfg, "results.json")
    with open(path) as f:
        d = json.load(f)
    return d, {c["allocator_label"]: c for c in d["cases"]}


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sim", default="results/sim")
    ap.add_argument("--gpu", default="results/h200")
    ap.add_argument("--out", default="results/h200/sim_vs_h200.md")
    a = ap.parse_args()
    lines = [
        "# Simulated step time against the H200",
        "",
        "Written by `python3 scripts/sim_vs_h200.py` from `results/sim/{dynamic,fixed}_seq/results.json` "
        "(sim, modeled steps/s) and `results/h200/{dynamic,fixed}_seq/results.json` (measured).",
        "",
    ]
    all_in_band, all_ranked = True, True
    for cfg in CONFIGS:
        sd, sim = load(a.sim, cfg)
        gd, gpu = load(a.gpu, cfg)
        labels = [l for l in gpu if l in sim]
        sps = {l: (sim[l]["throughput"]["steps_per_s"], gpu[l]["throughput"]["steps_per_s"]) for l in labels}
        rank_s = {l: i + 1 for i, l in enumerate(sorted(labels, key=lambda l: -sps[l][0]))}
        rank_g = {l: i + 1 for i, l in enumerate(sorted(labels, key=lambda l: -sps[l][1]))}
        disagree, unlike = [], []
        steps = {l: (sim[l]["steps_completed"], gpu[l]["steps_completed"]) for l in labels}
        for x in labels:
            for y in labels:
                gx, gy = sps[x][1], sps[y][1]
                if not gx > gy * (1 + TIE):
                    continue
                if steps[x][0] != steps[y][0] or steps[x][1] != steps[y][1]:
                    if not sps[x][0] > sps[y][0]:
                        unlike.append(f"{x} > {y}")
                elif not sps[x][0] > sps[y][0]:
                    disagree.append(f"{x} > {y}")
        all_ranked &= not disagree
        sim_cap = sd["device"]["capacity_bytes"]
        gpu_cap = gd["device"]["capacity_bytes"]
        lines += [
            f"## {cfg}: {sd['device']['name']} (sim, capacity {gib(sim_cap)}) against "
            f"{gd['device']['name']} (capacity {gib(gpu_cap)})",
            "",
            f"sim: `{sd.get('command', '')}`  ",
            f"H200: `{gd.get('command', '')}`",
            "",
            "| allocator | steps/s sim (modeled) | steps/s H200 | sim / H200 | within +-25% | rank sim | rank H200 | steps sim / H200 | peak reserved sim | peak reserved H200 |",
            "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
        ]
        for l in labels:
            s, g = sps[l]
            r = s / g
            ok = abs(r - 1) <= BAND
            all_in_band &= ok
            lines.append(
                f"| {l} | {s:.2f} | {g:.2f} | {r:.2f}x | {'yes' if ok else 'NO'} | {rank_s[l]} | {rank_g[l]} | "
                f"{sim[l]['steps_completed']} / {gpu[l]['steps_completed']} | {gib(sim[l]['peak_reserved_bytes'])} | "
                f"{gib(gpu[l]['peak_reserved_bytes'])} |"
            )
        lines += ["", "Ranking by steps/s: " + ("the same as on the H200 (allocators within 3% on the H200 count as tied)."
                                             if not disagree else "differs: the H200 has " + "; ".join(disagree) + ", the sim not.")]
        if unlike:
            lines += ["Ordered differently, but over different steps (not counted): the H200 has " + "; ".join(unlike) + "."]
        lines += [""]
    lines += [
        f"Every allocator within +-25%: {'yes' if all_in_band else 'no'}. "
        f"Same ranking on both configs: {'yes' if all_ranked else 'no'}.",
        "",
    ]
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines))
    os.replace(tmp, a.out)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
