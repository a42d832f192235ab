#!/usr/bin/env python3
"""Writes the synthetic PyTorch memory snapshots the tests read (tests/data/torch_snapshots/synthetic/).

Each is a dict shaped like torch.cuda.memory._snapshot() (segments, device_traces,
allocator_settings, external_annotations) or one of its older forms, pickled with Python's own
pickle (no torch needed). The events are hand-written to follow PyTorch's caching allocator
(2 MiB small segments, 20 MiB large ones below 10 MiB, 2 MiB rounding above); the real recorded
snapshots are in tests/data/torch_snapshots/. Also writes values_p{0..5}.pickle: every plain
value type, for the pickle reader's own test. Run from anywhere; output is deterministic.
"""
import os
import pickle

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "torch_snapshots", "synthetic")
MiB = 1 << 20


def frames(user_line, fn="step"):
    # Innermost first, as PyTorch writes them; a PyTorch frame before the user's.
    return [
        {"filename": "/usr/lib/python3/site-packages/torch/nn/modules/linear.py", "line": 125, "name": "forward"},
        {"filename": "/home/u/train.py", "line": user_line, "name": fn},
    ]


def settings(conf=""):
    return {
        "PYTORCH_CUDA_ALLOC_CONF": conf,
        "max_split_size": -1,
        "garbage_collection_threshold": 0.0,
        "expandable_segments": "expandable_segments:True" in conf,
        "pinned_num_register_threads": 1,
        "release_lock_on_cudamalloc": False,
        "pinned_use_cuda_host_register": False,
        "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
    }


class Trace:
    def __init__(self):
        self.entries = []
        self.t = 1700000000000000

    def add(self, action, addr, size, stream=0, fr=None, key="addr", no_frames=False):
        self.t += 7
        e = {"action": action, key: addr, "size": size, "stream": stream, "time_us": self.t}
        if not no_frames:
            e["frames"] = fr if fr is not None else []
        self.entries.append(e)


def segment(addr, total, blocks, stream=0, device=0, large=True, expandable=False):
    out = []
    a = addr
    for size, state, req in blocks:
        out.append({"address": a, "size": size, "requested_size": req, "state": state, "frames": []})
        a += size
    return {"device": device, "address": addr, "total_size": total,
            "allocated_size": sum(b[0] for b in blocks if b[1] == "active_allocated"),
            "active_size": sum(b[0] for b in blocks if b[1] != "inactive"),
            "requested_size": sum(b[2] for b in blocks if b[1] != "inactive"),
            "stream": stream, "segment_type": "large" if large else "small", "segment_pool_id": (0, 0),
            "is_expandable": expandable, "frames": [], "blocks": out}


S, L, B = 0x7F0000000000, 0x7F0000200000, 0x7F0001600000


def basic():
    t = Trace()
    t.add("segment_alloc", S, 2 * MiB)
    t.add("alloc", S, 1000, fr=frames(12))
    t.add("segment_alloc", L, 20 * MiB)
    t.add("alloc", L, 5 * MiB, fr=frames(13))
    t.add("alloc", L + 5 * MiB, 3000000, fr=frames(14, "attention"))
    t.add("free_requested", S, 1000)
    t.add("free_completed", S, 1000)
    t.add("free_requested", L, 5 * MiB)
    t.add("free_completed", L, 5 * MiB)
    t.add("segment_alloc", B, 30 * MiB)
    t.add("alloc", B, 30 * MiB, fr=frames(15))
    t.add("free_requested", L + 5 * MiB, 3000000)
    t.add("free_completed", L + 5 * MiB, 3000000)
    t.add("free_requested", B, 30 * MiB)
    t.add("free_completed", B, 30 * MiB)
    segs = [segment(S, 2 * MiB, [(2 * MiB, "inactive", 0)], large=False),
            segment(L, 20 * MiB, [(20 * MiB, "inactive", 0)]),
            segment(B, 30 * MiB, [(30 * MiB, "inactive", 0)])]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def zero_byte():
    # A request of 0 bytes (PyTorch hands out nullptr without asking its allocator, so its own
    # traces hold none; another recorder's may): no allocator call, and the calls after it keep
    # their place.
    t = Trace()
    t.add("segment_alloc", S, 2 * MiB)
    t.add("alloc", S, 1000, fr=frames(12))
    t.add("alloc", 0, 0, fr=frames(40, "empty"))
    t.add("segment_alloc", L, 20 * MiB)
    t.add("alloc", L, 5 * MiB, fr=frames(13))
    t.add("free_requested", 0, 0)
    t.add("free_completed", 0, 0)
    t.add("free_requested", S, 1000)
    t.add("free_completed", S, 1000)
    t.add("segment_alloc", B, 30 * MiB)
    t.add("alloc", B, 30 * MiB, fr=frames(15))
    segs = [segment(S, 2 * MiB, [(2 * MiB, "inactive", 0)], large=False),
            segment(L, 20 * MiB, [(5 * MiB, "active_allocated", 5 * MiB), (15 * MiB, "inactive", 0)]),
            segment(B, 30 * MiB, [(30 * MiB, "active_allocated", 30 * MiB)])]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def two_streams():
    side = 0x55D0C0FFEE00
    t = Trace()
    t.add("segment_alloc", L, 20 * MiB, stream=side)
    t.add("alloc", L, 4 * MiB, stream=side, fr=frames(30, "prefetch"))
    t.add("free_requested", L, 4 * MiB, stream=side)  # used on stream 0 (record_stream): returned later
    t.add("segment_alloc", B, 20 * MiB)
    t.add("alloc", B, 6 * MiB, fr=frames(31))
    t.add("free_completed", L, 4 * MiB, stream=side)
    t.add("alloc", L, 8 * MiB, stream=side, fr=frames(32, "prefetch"))
    t.add("free_requested", B, 6 * MiB)
    t.add("free_completed", B, 6 * MiB)
    segs = [segment(L, 20 * MiB, [(8 * MiB, "active_allocated", 8 * MiB), (12 * MiB, "inactive", 0)], stream=side),
            segment(B, 20 * MiB, [(20 * MiB, "inactive", 0)])]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def overflow():
    # The ring buffer kept only the last entries: two blocks were allocated before it starts
    # (one freed in the trace, one still alive at the end and never mentioned by the trace).
    t = Trace()
    t.add("free_requested", L + 4 * MiB, 2 * MiB)
    t.add("free_completed", L + 4 * MiB, 2 * MiB)
    t.add("alloc", L + 4 * MiB, 1 * MiB + 512, fr=frames(40))
    segs = [segment(L, 20 * MiB, [(4 * MiB, "active_allocated", 4 * MiB), (1 * MiB + 512, "active_allocated", 1 * MiB + 512),
                                  (15 * MiB - 512, "inactive", 0)])]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def cached_segment():
    # The trace reserves a small segment; `segments` also holds a 1 GiB one, cached since before the
    # trace's first entry (no segment_alloc of it): the trace does not start with the allocator.
    t = Trace()
    t.add("segment_alloc", S, 2 * MiB)
    t.add("alloc", S, 1000, fr=frames(30))
    t.add("free_requested", S, 1000)
    t.add("free_completed", S, 1000)
    segs = [segment(S, 2 * MiB, [(2 * MiB, "inactive", 0)], large=False),
            segment(L, 1024 * MiB, [(1024 * MiB, "inactive", 0)])]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def freed_before():
    # empty_cache() of a 1 GiB segment cached before the trace's first entry: a segment_free of
    # memory the trace never reserved.
    t = Trace()
    t.add("segment_free", L, 1024 * MiB)
    t.add("segment_alloc", S, 2 * MiB)
    t.add("alloc", S, 1000, fr=frames(30))
    t.add("free_requested", S, 1000)
    t.add("free_completed", S, 1000)
    segs = [segment(S, 2 * MiB, [(2 * MiB, "inactive", 0)], large=False)]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def partly_mapped_before():
    # An expandable segment of 40 MiB whose first 20 MiB page was mapped before the trace's first
    # entry; the trace maps the second and allocates across both.
    t = Trace()
    t.add("segment_map", L + 20 * MiB, 20 * MiB)
    t.add("alloc", L, 30 * MiB, fr=frames(50))
    segs = [segment(L, 40 * MiB, [(30 * MiB, "active_allocated", 30 * MiB), (10 * MiB, "inactive", 0)],
                    expandable=True)]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings("expandable_segments:True"),
            "external_annotations": []}


def pending_free_at_start():
    # A block allocated before the trace's first entry whose free the trace requests, still
    # pending (used on another stream) when the snapshot is taken: listed as active_pending_free.
    t = Trace()
    t.add("free_requested", S, 1000)
    segs = [segment(S, 2 * MiB, [(1024, "active_pending_free", 1000), (2 * MiB - 1024, "inactive", 0)], large=False)]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def two_devices():
    t0, t1 = Trace(), Trace()
    t0.add("segment_alloc", S, 2 * MiB)
    t0.add("alloc", S, 512)
    t0.add("free_requested", S, 512)
    t1.add("segment_alloc", L, 20 * MiB)
    for i in range(3):
        t1.add("alloc", L + i * MiB, MiB)
    for i in range(3):
        t1.add("free_requested", L + i * MiB, MiB)
        t1.add("free_completed", L + i * MiB, MiB)
    segs = [segment(S, 2 * MiB, [(512, "active_pending_free", 512), (2 * MiB - 512, "inactive", 0)], large=False),
            segment(L, 20 * MiB, [(20 * MiB, "inactive", 0)], device=1)]
    return {"segments": segs, "device_traces": [t0.entries, t1.entries], "allocator_settings": settings(),
            "external_annotations": []}


def expandable_oom():
    t = Trace()
    t.add("segment_map", L, 20 * MiB)
    t.add("alloc", L, 12 * MiB, fr=frames(50))
    t.add("segment_map", L + 20 * MiB, 20 * MiB)
    t.add("alloc", L + 12 * MiB, 24 * MiB, fr=frames(51))
    t.add("oom", 1 << 30, 64 * MiB, fr=frames(52, "forward"), key="device_free")
    segs = [segment(L, 40 * MiB, [(12 * MiB, "active_allocated", 12 * MiB), (24 * MiB, "active_allocated", 24 * MiB),
                                  (4 * MiB, "inactive", 0)], expandable=True)]
    conf = "expandable_segments:True,max_split_size_mb:128"
    st = settings(conf)
    st["max_split_size"] = 128 * MiB
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": st, "external_annotations": []}


def stale_conf_text():
    # The option string PyTorch parsed last is not what the allocator ran with: the run started with
    # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, then torch.cuda.memory._set_allocator_settings(
    # "max_split_size_mb:128,max_non_split_rounding_mb:256") kept expandable segments on. The
    # individual settings record it; the trace maps (expandable) segments.
    t = Trace()
    t.add("segment_map", L, 20 * MiB)  # (mapped in 20 MiB pieces)
    t.add("alloc", L, 12 * MiB, fr=frames(50))
    t.add("segment_map", L + 20 * MiB, 20 * MiB)
    t.add("alloc", L + 12 * MiB, 24 * MiB, fr=frames(51))
    for addr, size in ((L, 12 * MiB), (L + 12 * MiB, 24 * MiB)):
        t.add("free_requested", addr, size)
        t.add("free_completed", addr, size)
    segs = [segment(L, 40 * MiB, [(40 * MiB, "inactive", 0)], expandable=True)]
    st = settings("max_split_size_mb:128,max_non_split_rounding_mb:256")
    st["max_split_size"] = 128 * MiB
    st["expandable_segments"] = True
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": st, "external_annotations": []}


def partial_conf_fields():
    # Only expandable_segments recorded beside the option string (a hand-made or other tool's
    # snapshot; PyTorch writes all four): the text's max_split_size_mb stays.
    s = basic()
    s["allocator_settings"] = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128,expandable_segments:True",
                               "expandable_segments": True}
    return s


def mistyped_conf_field():
    # expandable_segments recorded as a string, which PyTorch never writes: the text is used as written.
    s = basic()
    st = settings("expandable_segments:True")
    st["expandable_segments"] = "True"
    s["allocator_settings"] = st
    return s


def rebuilt_settings():
    # No option string: the settings are rebuilt from the individual fields.
    s = basic()
    st = settings("")
    st["max_split_size"] = 256 * MiB
    st["garbage_collection_threshold"] = 0.6
    st["expandable_segments"] = True
    st["roundup_power2_divisions"]["256"] = 4
    st["roundup_power2_divisions"]["512"] = 8
    s["allocator_settings"] = st
    return s


def legacy_list():
    # The oldest form: a bare list of segments whose blocks carry their allocation history.
    return [{"device": 0, "address": L, "total_size": 20 * MiB, "allocated_size": 6 * MiB, "active_size": 6 * MiB,
             "stream": 0, "segment_type": "large",
             "blocks": [{"size": 6 * MiB, "state": "active_allocated",
                         "history": [{"addr": L, "real_size": 6 * MiB - 100, "frames": frames(60)}]},
                        {"size": 14 * MiB, "state": "inactive"}]},
            {"device": 0, "address": S, "total_size": 2 * MiB, "allocated_size": 512, "active_size": 512,
             "stream": 0, "segment_type": "small",
             "blocks": [{"size": 512, "state": "active_allocated", "history": [{"addr": S, "real_size": 100}]},
                        {"size": 2 * MiB - 512, "state": "inactive"}]}]


def values(protocol):
    # Protocols below 4 pickle sets, and below 3 bytes, through REDUCE of a global (refused by
    # the reader): those values are left out there.
    shared = ["shared", 1]
    v = {
        "ints": [0, 1, 255, 256, 65535, 65536, -1, -256, 2**31 - 1, -2**31, 2**31, 2**32, 2**63 - 1, -2**63],
        "big": [2**63, 2**100, -2**64],
        "floats": [0.0, 1.5, -2.25, 1e300],
        "strs": ["", "ascii", "caf\u00e9 \u2603 \U0001F600", "back\\slash\nnewline", "x" * 300],
        "bytes": b"\x00\x01\xff",
        "consts": [True, False, None],
        "tuple0": (), "tuple1": (1,), "tuple2": (1, "a"), "tuple3": (1, 2, 3), "tuple4": (1, 2, 3, 4),
        "set": {7}, "frozenset": frozenset([8]),
        "nested": {"a": [{"b": (1, [2, {"c": None}])}]},
        "shared": [shared, shared],
        "long_list": list(range(2500)),
        "big_dict": {str(i): i for i in range(1200)},
    }
    if protocol < 4:
        del v["set"], v["frozenset"]
    if protocol < 3:
        del v["bytes"]
    return v


def long_trace():
    # 1,200 entries without frames (as recorded with stacks off), so Python's pickler writes them
    # in two APPENDS batches with memoized keys: the second is read flat (pickle::ListSink).
    t = Trace()
    t.add("segment_alloc", B, 64 * MiB, no_frames=True)
    for i in range(400):
        a = B + (i % 32) * MiB
        t.add("alloc", a, MiB - 512 * (i % 7), stream=7 if i % 5 == 0 else 0, no_frames=True)
        t.add("free_requested", a, MiB - 512 * (i % 7), stream=7 if i % 5 == 0 else 0, no_frames=True)
        t.add("free_completed", a, MiB - 512 * (i % 7), stream=7 if i % 5 == 0 else 0, no_frames=True)
    return {"segments": [], "device_traces": [t.entries[:1200]], "allocator_settings": settings(),
            "external_annotations": []}


def long_frames():
    # 1,100 entries with frames (as recorded with PyTorch's default stacks): the second APPENDS
    # batch is read flat, each entry's frames list made as nodes and its frame dicts read by
    # shape (pickle::ListSink); frames of no, one and several dicts, lines of one to four bytes.
    t = Trace()
    t.add("segment_alloc", B, 64 * MiB, no_frames=True)
    files = ["/usr/lib/python3/site-packages/torch/nn/modules/linear.py", "/home/u/model.py", "/home/u/train.py"]
    for i in range(367):
        a = B + (i % 32) * MiB
        n = i % 4
        fr = [{"filename": files[(i + k) % 3], "line": [7, 300, 70000, 125][(i + k) % 4], "name": ["forward", "step"][k % 2]}
              for k in range(n)]
        t.add("alloc", a, MiB - 512 * (i % 7), stream=7 if i % 5 == 0 else 0, fr=fr)
        t.add("free_requested", a, MiB - 512 * (i % 7), stream=7 if i % 5 == 0 else 0, fr=fr[:1])
        t.add("free_completed", a, MiB - 512 * (i % 7), stream=7 if i % 5 == 0 else 0, fr=[])
    return {"segments": [], "device_traces": [t.entries[:1100]], "allocator_settings": settings(),
            "external_annotations": []}


def shared_frames():
    # 1,100 entries with frames in PyTorch's own layout: one dict per distinct frame and one list
    # per traceback, shared objects, so the pickler writes each once and fetches it from its memo
    # after (a free_completed shares its alloc's list, as PyTorch's trace does). The batches
    # after the first read the fetched frames flat, and stacks seen before by their bytes.
    t = Trace()
    t.add("segment_alloc", B, 64 * MiB, no_frames=True)
    files = ["/usr/lib/python3/site-packages/torch/nn/modules/linear.py", "/home/u/model.py", "/home/u/train.py"]
    distinct = [{"filename": files[k % 3], "line": [7, 300, 70000, 125, 9][k % 5], "name": ["forward", "step"][k % 2]}
                for k in range(12)]
    stacks = [[distinct[(s + k * 5) % 12] for k in range(1 + s % 5)] for s in range(9)]
    for i in range(367):
        a = B + (i % 32) * MiB
        fr = list(stacks[i % 9]) if i % 3 else stacks[i % 9]  # mostly a new list of the same frames
        t.add("alloc", a, MiB - 512 * (i % 7), stream=7 if i % 5 == 0 else 0, fr=fr)
        t.add("free_requested", a, MiB - 512 * (i % 7), stream=7 if i % 5 == 0 else 0, fr=list(stacks[(i + 4) % 9]))
        t.add("free_completed", a, MiB - 512 * (i % 7), stream=7 if i % 5 == 0 else 0, fr=fr)
    return {"segments": [], "device_traces": [t.entries[:1100]], "allocator_settings": settings(),
            "external_annotations": []}


def freed_at_peak():
    """A block freed while another stream still uses it (record_stream), at the run's peak: PyTorch's
    allocated_bytes drops at its free_requested (peak 8 MiB, then 6 MiB beside it), its memory
    returns at free_completed (the 6 MiB block cannot take its place: one 20 MiB segment holds both).
    A second such block is freed and not returned when the snapshot is taken."""
    t = Trace()
    t.add("segment_alloc", L, 20 * MiB)
    t.add("alloc", L, 8 * MiB, fr=frames(40))
    t.add("free_requested", L, 8 * MiB)  # used on another stream: returned three entries on
    t.add("alloc", L + 8 * MiB, 6 * MiB, fr=frames(41))
    t.add("alloc", L + 14 * MiB, 2 * MiB, fr=frames(42))
    t.add("free_completed", L, 8 * MiB)
    t.add("free_requested", L + 8 * MiB, 6 * MiB)
    t.add("free_completed", L + 8 * MiB, 6 * MiB)
    t.add("free_requested", L + 14 * MiB, 2 * MiB)  # still used elsewhere when the snapshot is taken
    segs = [segment(L, 20 * MiB, [(14 * MiB, "inactive", 0), (2 * MiB, "active_pending_free", 2 * MiB),
                                  (4 * MiB, "inactive", 0)])]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def pending_before_trace():
    """A block listed active_pending_free that the trace never mentions: freed before the trace's
    first entry while another stream used it, its memory still taken at the end."""
    t = Trace()
    t.add("alloc", L + 4 * MiB, 4 * MiB, fr=frames(50))
    segs = [segment(L, 20 * MiB, [(4 * MiB, "active_pending_free", 4 * MiB), (4 * MiB, "active_allocated", 4 * MiB),
                                  (12 * MiB, "inactive", 0)])]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def taken_back():
    """A 1 GiB block freed while another stream uses it, then a second 1 GiB block: recorded on a
    large card (two segments). Replayed under 1600 MiB, the second request fails until the first
    block is taken back (PyTorch waits for its stream before it gives up)."""
    t = Trace()
    t.add("segment_alloc", L, 1024 * MiB)
    t.add("alloc", L, 1024 * MiB, fr=frames(60))
    t.add("free_requested", L, 1024 * MiB)
    t.add("segment_alloc", B, 1024 * MiB)
    t.add("alloc", B, 1024 * MiB, fr=frames(61))
    t.add("free_completed", L, 1024 * MiB)
    t.add("free_requested", B, 1024 * MiB)
    t.add("free_completed", B, 1024 * MiB)
    segs = [segment(L, 1024 * MiB, [(1024 * MiB, "inactive", 0)]), segment(B, 1024 * MiB, [(1024 * MiB, "inactive", 0)])]
    return {"segments": segs, "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def marks():
    """gpumembench_taken_back marks the reader must not follow: on the free of a block whose free
    was never requested (a plain free), and with a value other than True (no mark)."""
    t = Trace()
    t.add("segment_alloc", L, 20 * MiB)
    t.add("alloc", L, 4 * MiB)
    t.add("free_requested", L, 4 * MiB)
    t.entries.append({"action": "free_completed", "addr": L, "size": 4 * MiB, "stream": 0, "time_us": 1,
                      "frames": [], "gpumembench_taken_back": 1})  # an int: no mark, completes at once
    t.add("alloc", L + 4 * MiB, 2 * MiB)
    t.entries.append({"action": "free_completed", "addr": L + 4 * MiB, "size": 2 * MiB, "stream": 0, "time_us": 2,
                      "frames": [], "gpumembench_taken_back": True})  # no request before it: a plain free
    t.add("alloc", L, 1 * MiB)
    return {"segments": [], "device_traces": [t.entries], "allocator_settings": settings(),
            "external_annotations": []}


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = {"basic": basic(), "two_streams": two_streams(), "overflow": overflow(), "two_devices": two_devices(),
             "expandable_oom": expandable_oom(), "rebuilt_settings": rebuilt_settings(), "legacy_list": legacy_list(),
             "long_trace": long_trace(), "long_frames": long_frames(), "shared_frames": shared_frames(),
             "cached_segment": cached_segment(), "pending_free_at_start": pending_free_at_start(),
             "freed_before": freed_before(), "partly_mapped_before": partly_mapped_before(),
             "zero_byte": zero_byte(), "stale_conf_text": stale_conf_text(),
             "partial_conf_fields": partial_conf_fields(), "mistyped_conf_field": mistyped_conf_field(),
             "freed_at_peak": freed_at_peak(), "pending_before_trace": pending_before_trace(),
             "taken_back": taken_back(), "marks": marks()}
    for name, data in cases.items():
        with open(os.path.join(OUT, f"{name}.pickle"), "wb") as f:
            pickle.dump(data, f, protocol=4)
    for p in (2, 3, 5):
        with open(os.path.join(OUT, f"basic_p{p}.pickle"), "wb") as f:
            pickle.dump(basic(), f, protocol=p)
    for p in range(6):
        with open(os.path.join(OUT, f"values_p{p}.pickle"), "wb") as f:
            pickle.dump(values(p), f, protocol=p)
    with open(os.path.join(OUT, "refused_set_p2.pickle"), "wb") as f:
        pickle.dump({"set": {1, 2}}, f, protocol=2)


if __name__ == "__main__":
    main()
