#!/usr/bin/env python3
"""Checks that a snapshot written by `gpumembench replay --export-snapshot` has the shape
PyTorch's viewers read (torch/cuda/_memory_viz.py: segsum, trace, segments/memory flame
graphs; the memory_viz web page reads the same keys). No torch needed: the checks walk the
keys those functions use and re-do segsum's own consistency assertions.

    check_exported_snapshot.py FILE [--ops N] [--ooms N] [--filename NAME]

--filename: some alloc's frames name this file.
"""
import pickle
import sys

ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot"}
STATES = {"active_allocated", "active_pending_free", "inactive"}


def fail(msg):
    print(f"check_exported_snapshot: {msg}")
    sys.exit(1)


def main():
    path = sys.argv[1]
    want = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    with open(path, "rb") as f:
        data = pickle.load(f)
    if not isinstance(data, dict):
        fail(f"top level is {type(data).__name__}, not dict")
    for key in ("segments", "device_traces", "allocator_settings"):
        if key not in data:
            fail(f"missing key {key}")
    total_reserved = total_allocated = 0
    pending_blocks = set()  # active_pending_free block addresses
    for i, seg in enumerate(data["segments"]):
        for key in ("device", "address", "total_size", "allocated_size", "stream", "segment_type", "blocks"):
            if key not in seg:
                fail(f"segments[{i}] has no {key}")
        size_sum = 0
        addr = seg["address"]
        for j, b in enumerate(seg["blocks"]):
            # _block_extra: with 'frames', the viewer reads b['frames'] and b['requested_size'].
            for key in ("size", "state", "frames", "requested_size", "address"):
                if key not in b:
                    fail(f"segments[{i}].blocks[{j}] has no {key}")
            if b["state"] not in STATES:
                fail(f"segments[{i}].blocks[{j}].state {b['state']!r}")
            if b["address"] != addr:
                fail(f"segments[{i}].blocks[{j}].address is not the end of the block before")
            if b["state"] in ("active_allocated", "active_pending_free"):
                if b["requested_size"] > b["size"]:
                    fail(f"segments[{i}].blocks[{j}]: requested_size above size")
                total_allocated += b["requested_size"]
                if b["state"] == "active_pending_free":
                    pending_blocks.add(addr)
            addr += b["size"]
            size_sum += b["size"]
        if size_sum != seg["total_size"]:
            fail(f"segments[{i}]: blocks add up to {size_sum}, total_size is {seg['total_size']}")
        total_reserved += seg["total_size"]
    traces = data["device_traces"]
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        fail("device_traces is not a list of lists")
    live = {}
    requested = set()  # freed (free_requested), not returned (free_completed)
    allocs = ooms = 0
    for d, trace in enumerate(traces):
        for i, e in enumerate(trace):
            a = e.get("action")
            if a not in ACTIONS:
                fail(f"device_traces[{d}][{i}].action {a!r}")
            for key in ("size", "stream", "frames", "time_us", "device_free" if a == "oom" else "addr"):
                if key not in e:
                    fail(f"device_traces[{d}][{i}] ({a}) has no {key}")
            if a == "alloc":
                if e["addr"] in live:
                    fail(f"device_traces[{d}][{i}]: alloc at a live address")
                live[e["addr"]] = e["size"]
                allocs += 1
            elif a == "free_requested":
                if e["addr"] not in live or e["addr"] in requested:
                    fail(f"device_traces[{d}][{i}]: free_requested of an address not live")
                requested.add(e["addr"])
            elif a == "free_completed":
                if live.pop(e["addr"], None) != e["size"]:
                    fail(f"device_traces[{d}][{i}]: free_completed of an address not allocated with that size")
                if e["addr"] not in requested:
                    fail(f"device_traces[{d}][{i}]: free_completed without its free_requested")
                requested.discard(e["addr"])
            elif a == "oom":
                ooms += 1
    # What is live at the end of the trace is what the segments hold; the blocks freed and not
    # returned are the segments' active_pending_free ones.
    if requested != pending_blocks:
        fail(f"{len(requested)} blocks freed and not returned in the trace, {len(pending_blocks)} active_pending_free")
    if sum(live.values()) != total_allocated:
        fail(f"the trace leaves {sum(live.values())} bytes live, the segments hold {total_allocated}")
    if "--allocs" in want and allocs != int(want["--allocs"]):
        fail(f"{allocs} alloc entries, expected {want['--allocs']}")
    if "--ooms" in want and ooms != int(want["--ooms"]):
        fail(f"{ooms} oom entries, expected {want['--ooms']}")
    if "--filename" in want:
        name = want["--filename"]
        seen = {f.get("filename") for t in traces for e in t for f in e["frames"]}
        if name not in seen:
            fail(f"no frame names {name!r}; the frames name {sorted(map(str, seen))[:5]}")
    print(f"check_exported_snapshot: ok: {len(data['segments'])} segments ({total_reserved} bytes reserved, "
          f"{total_allocated} allocated), {sum(len(t) for t in traces)} trace entries, {allocs} allocs, {ooms} OOMs")


if __name__ == "__main__":
    main()
