#!/usr/bin/env python3
"""Writes a PyTorch snapshot with frames, for measuring: a recorded snapshot whose trace entries
get a Python stack each, as torch.cuda.memory._record_memory_history() records by default.

    scripts/make_frames_snapshot.py SRC.pickle.gz OUT.pickle.gz [--seed S] [--fresh-strs]

Every alloc, free_requested and free_completed entry of SRC gets a list of 6 to 14 frames
({'name', 'filename', 'line'}), drawn from 300 stacks over a few files and function names (one
stack per request size, so a buffer's entries share it). The result is pickled as
torch.cuda.memory._dump_snapshot pickles (protocol 4) and gzip-compressed; deterministic for a
seed. From tests/data/torch_snapshots/snap_speed_120steps.pickle.gz: 452,603 entries, a 186 MB
pickle, 6.2 MB compressed (scripts/measure_speed.py makes it under /tmp). The stacks' strs are
shared objects, so the pickler writes each once and fetches it from its memo after; PyTorch's
_snapshot() makes a new str for every frame's name and filename (py_symbolize), so a recorded
snapshot writes them all out: --fresh-strs writes that form. PyTorch also makes one dict per
distinct frame, shared by the entries that have it (the H200 recordings fetch them from the memo):
--shared-dicts writes that form.
"""
import argparse
import gzip
import pickle
import random


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shared-dicts", action="store_true",
                    help="one dict per distinct frame, shared by every entry with that frame, as PyTorch's "
                         "_snapshot() makes them (py_symbolize): the pickler writes each once and fetches it "
                         "from its memo after, as in snapshots recorded on the H200")
    ap.add_argument("--fresh-strs", action="store_true",
                    help="every frame's name and filename a new str object, as PyTorch's _snapshot() makes "
                         "them: the pickler then writes each one out (and memoizes it) instead of fetching "
                         "the first from its memo")
    a = ap.parse_args()
    with gzip.open(a.src, "rb") as f:
        s = pickle.load(f)
    rng = random.Random(a.seed)
    files = ["/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/module.py",
             "/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/functional.py",
             "/opt/torch/.venv/lib/python3.12/site-packages/torch/_tensor.py",
             "/work/train.py", "/work/model.py"]
    names = ["forward", "_call_impl", "_wrapped_call_impl", "linear", "softmax", "backward", "step", "main",
             "<module>", "attention", "mlp"]
    stacks = [[(rng.choice(names), rng.choice(files), rng.randint(1, 2000)) for _ in range(rng.randint(6, 14))]
              for _ in range(300)]
    frame_dicts = {}
    for trace in s["device_traces"]:
        for e in trace:
            if e["action"] in ("alloc", "free_requested", "free_completed"):
                stack = stacks[(e["size"] * 2654435761) % len(stacks)]
                if a.shared_dicts:
                    e["frames"] = [frame_dicts.setdefault(f, {"name": f[0], "filename": f[1], "line": f[2]})
                                   for f in stack]
                elif a.fresh_strs:
                    e["frames"] = [{"name": n.encode().decode(), "filename": fn.encode().decode(), "line": line}
                                   for (n, fn, line) in stack]
                else:
                    e["frames"] = [{"name": n, "filename": fn, "line": line} for (n, fn, line) in stack]
    with gzip.open(a.out, "wb", compresslevel=6) as f:
        pickle.dump(s, f, protocol=4)


if __name__ == "__main__":
    main()
