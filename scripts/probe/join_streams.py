#!/usr/bin/env python3
"""Adds a `stream` column to a GMB_CUDA_CALL_LOG pool log, taken from an RMM log of the same run
(`gpumembench replay ... --export-rmm-log`, whose allocate/free rows come in the order of the
pool calls), so that scripts/probe/pool_placement.py can judge a multi-stream run by stream.

    gpumembench replay --device sim --allocator cuda_mempool \\
        --trace tests/data/torch_snapshots/snap_two_streams.pickle.gz --export-rmm-log /tmp/ts.rmm
    python3 scripts/probe/join_streams.py results/h200/probe/pool/early/snap_two_streams_calls.csv.gz \\
        /tmp/ts.rmm results/h200/probe/pool/early/snap_two_streams_calls_streams.csv.gz

The rows are matched one by one (allocate with malloc_async, free with free_async, the same
bytes); a row that does not match stops it with an error. Pool calls after the RMM log's last row
(the frees at the end of a replay) get stream 0.
"""
import csv
import gzip
import sys


def main(log_path, rmm_path, out_path):
    opener = gzip.open if log_path.endswith(".gz") else open
    with opener(log_path, "rt") as f:
        rows = list(csv.DictReader(f))
    with open(rmm_path) as f:
        rmm = list(csv.DictReader(f))
    pool = [r for r in rows if r["call"] in ("malloc_async", "free_async")]
    if len(rmm) > len(pool):
        sys.exit(f"{rmm_path}: {len(rmm)} rows, more than the {len(pool)} pool calls of {log_path}")
    if any(r["call"] != "free_async" for r in pool[len(rmm):]):
        sys.exit(f"{log_path}: a malloc_async after the last row of {rmm_path}: not the same run")
    for i, (r, m) in enumerate(zip(pool, rmm)):
        action = "allocate" if r["call"] == "malloc_async" else "free"
        if action != m["Action"] or int(r["bytes"]) != int(m["Size"]):
            sys.exit(f"{log_path}: pool call {i} ({r['call']} of {r['bytes']} bytes) does not match "
                     f"{rmm_path} row {i + 2} ({m['Action']} of {m['Size']} bytes)")
    streams = [int(m["Stream"], 16) for m in rmm]
    with gzip.open(out_path, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(rows[0].keys()) + ["stream"])
        k = 0
        for r in rows:
            stream = 0
            if r["call"] in ("malloc_async", "free_async"):
                stream = streams[k] if k < len(streams) else 0
                k += 1
            w.writerow(list(r.values()) + [stream])
    print(f"{out_path}: {len(rows)} rows, {min(len(pool), len(rmm))} with the RMM log's stream")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: join_streams.py CALL_LOG RMM_LOG OUT.csv.gz")
    main(*sys.argv[1:])
