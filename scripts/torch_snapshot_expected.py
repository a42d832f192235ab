#!/usr/bin/env python3
"""Writes tests/data/torch_snapshots/expected.json from the NAME.json files that
scripts/record_torch_training.py writes next to each NAME.pickle.gz: what PyTorch reported at the
end of each recording (torch.cuda.memory_stats()), the card's size and the memory-fraction limit.

    python3 scripts/torch_snapshot_expected.py RECORDING_DIR > tests/data/torch_snapshots/expected.json
"""
import glob
import json
import os
import sys

KEYS = ("reserved_bytes.all.peak", "allocated_bytes.all.peak", "num_device_alloc", "num_device_free", "num_ooms",
        "num_alloc_retries")
# Frees that waited on another stream set these apart from the allocated figures.
STREAM_WAIT_KEYS = ("active_bytes.all.peak", "active_bytes.all.current", "active.all.peak", "active.all.current",
                    "allocation.all.current", "allocated_bytes.all.current", "requested_bytes.all.peak",
                    "requested_bytes.all.current")
# Recordings whose trace does not start with the allocator: their memory_stats count events the
# trace does not hold, so only the conversion is checked (blocks alive at the start).
PARTIAL = {"snap_ring_overflow"}


def main():
    out = []
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
        if os.path.basename(path) == "manifest.json":
            continue
        d = json.load(open(path))
        name = os.path.basename(path)[:-5]
        ms = d["memory_stats"]
        out.append(dict(name=name, alloc_conf=d["run"]["alloc_conf"], total_memory=d["total_memory"],
                        memory_limit=d["memory_limit"], exact=name not in PARTIAL,
                        memory_stats={k: ms[k] for k in KEYS + (STREAM_WAIT_KEYS if d["run"].get("stream_wait") else ())}))
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
