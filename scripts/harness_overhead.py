#!/usr/bin/env python3
"""Where the wall time of each case went, from gpumembench results.json files (issue 5: the
harness must not be what is measured; on the GPU its share of a step must stay under 1%).

    python3 scripts/harness_overhead.py RESULTS.json [RESULTS.json ...] [--max-share 0.01]

For every case: the run's wall time split into allocator calls, the workload's compute calls
(kernel launches, and waits when the launch queue is full), the final wait for the GPU, and the
rest, which is the harness's own host time (event generation, bookkeeping, progress). Prints a
Markdown table with the command and device of each file. Exit status 1 when a case measured on
a GPU has a harness share above --max-share; runs on the simulated device are listed but not
judged (their time is modeled, the harness's is not).
"""
import argparse
import json
import sys


def median(v):
    return v["median"] if isinstance(v, dict) else v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+", help="results.json files")
    ap.add_argument("--max-share", type=float, default=0.01, help="largest harness share allowed (default 0.01)")
    args = ap.parse_args()
    worst = 0.0
    failed = False
    for path in args.results:
        with open(path) as f:
            r = json.load(f)
        dev = r["device"]
        print(f"### {r['config']['name']} on {dev['name']} ({dev['kind']})\n")
        print(f"Command: `{r.get('command', '?')}`\n")
        print("| case | steps | wall s | allocator calls | compute calls | final sync | harness | harness per step |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for c in r["cases"]:
            if "seconds" not in c:
                print(f"| {c['label']} | error: {c.get('error', '?')} | | | | | | |")
                continue
            modeled = c["throughput"]["modeled"]
            steps = c["steps_completed"]
            harness = median(c["harness_seconds"])
            if modeled:
                # The run's time is modeled: only the host times are real; show them as such.
                print(f"| {c['label']} | {steps} | (modeled) | {median(c['alloc_seconds']):.3f} s host | "
                      f"{c['compute_call_seconds']:.3f} s host | | {harness:.3f} s host | "
                      f"{1e6 * harness / max(steps, 1):.0f} µs |")
                continue
            wall = median(c["seconds"])
            share = lambda x: f"{100 * x / wall:.2f}%" if wall > 0 else "–"
            hs = c.get("harness_overhead_share")
            if hs is not None:
                worst = max(worst, hs)
                failed = failed or hs > args.max_share
            print(f"| {c['label']} | {steps} | {wall:.2f} | {share(median(c['alloc_seconds']))} | "
                  f"{share(c['compute_call_seconds'])} | {share(c['sync_seconds'])} | "
                  f"**{share(harness)}** | {1e6 * harness / max(steps, 1):.0f} µs |")
        print()
    print(f"Largest harness share measured on a GPU: {100 * worst:.3f}% (limit {100 * args.max_share:.2f}%)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
