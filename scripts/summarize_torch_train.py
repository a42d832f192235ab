#!/usr/bin/env python3
"""Shrink recorded PyTorch training runs (scripts/record_torch_training.py, calibration group)
into the small files the calibration test reads (tests/data/torch_train/):

    python3 scripts/summarize_torch_train.py RECORDINGS_DIR OUT_DIR [--steps N]

Per shape NAME (runs NAME.default and NAME.expandable):
  NAME.json         the model, per-step lengths, and per allocator setting the per-step
                    allocation counts, peak allocated / reserved bytes and device calls
                    (from the recorded torch.cuda.memory_stats())
  NAME.steps.csv.gz the default run's first N steps (default 2) as a trace (action,id,bytes,stream;
                    `gpumembench replay` reads it): ids count the recorded allocations from 1, a
                    free names its allocation's id; the steps split it by allocs_per_step (step 0's
                    count less allocs_before_trace, the parameters made before recording began)
"""

import argparse
import gzip
import json
import os
import pickle


def summary(run_json):
    d = json.load(open(run_json))
    ps = d["per_step"]
    counts = [ps[0]["allocation.all.allocated"]] + [
        ps[i]["allocation.all.allocated"] - ps[i - 1]["allocation.all.allocated"] for i in range(1, len(ps))]
    st = d["memory_stats"]
    return d, {
        "allocs_per_step": counts,  # step 0 includes the allocations made before the loop
        "allocations_total": st["allocation.all.allocated"],
        "peak_allocated_bytes": st["allocated_bytes.all.peak"],
        "peak_reserved_bytes": st["reserved_bytes.all.peak"],
        "num_device_alloc": st["num_device_alloc"],
        "num_device_free": st["num_device_free"],
        "num_alloc_retries": st["num_alloc_retries"],
        "num_ooms": st["num_ooms"],
        "alloc_conf": d.get("alloc_conf_env", ""),
    }


def steps_trace(pickle_gz, run, n_steps):
    snap = pickle.load(gzip.open(pickle_gz))
    tr = snap["device_traces"][0]
    counts = [s["allocation.all.allocated"] for s in run["per_step"]]
    n_alloc = sum(1 for e in tr if e["action"] == "alloc")
    k = counts[-1] - n_alloc  # allocations before the trace: the model's parameters
    bounds = [k] + counts
    rows, live, step = [], {}, 0
    for e in tr:
        if e["action"] == "alloc":
            k += 1
            while k > bounds[step + 1]:
                step += 1
            if step >= n_steps:
                break
            live[e["addr"]] = k - bounds[0]
            rows.append(f"alloc,{k - bounds[0]},{e['size']},{e['stream']}")
        elif e["action"] == "free_completed" and step < n_steps:
            i = live.pop(e["addr"], None)
            if i is not None:
                rows.append(f"free,{i},,{e['stream']}")
    return rows, bounds[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
    names = sorted({f.split(".")[0] for f in os.listdir(a.src) if f.endswith(".default.json")})
    os.makedirs(a.out, exist_ok=True)
    for name in names:
        d, default = summary(os.path.join(a.src, name + ".default.json"))
        _, expandable = summary(os.path.join(a.src, name + ".expandable.json"))
        rows, before = steps_trace(os.path.join(a.src, name + ".default.pickle.gz"), d, a.steps)
        out = {
            "name": name, "model": d["run"]["model"], "lengths": d["lengths"], "n_params": d["n_params"],
            "total_memory": d["total_memory"], "torch": d["torch"], "gpu": d["gpu"],
            "allocs_before_trace": before, "default": default, "expandable": expandable,
        }
        with open(os.path.join(a.out, name + ".json"), "w") as f:
            json.dump(out, f, indent=1)
        with gzip.GzipFile(os.path.join(a.out, name + ".steps.csv.gz"), "wb", mtime=0) as f:
            f.write(("action,id,bytes,stream\n" + "\n".join(rows) + "\n").encode())
        print(name, len(rows), "rows")


if __name__ == "__main__":
    main()
