#!/usr/bin/env python3
"""An OOM reproducer written by `gpumembench reduce` (gpumembench 0.1.0): 12 events that end in a fragmentation OOM
in PyTorch's CUDA caching allocator, replayed through torch.cuda.caching_allocator_alloc and
caching_allocator_delete with the allocator's memory limited to 8858370048 bytes (8.25 GiB) by
set_per_process_memory_fraction.

Source: tests/data/torch_snapshots/snap_stream_retry8_25g.pickle.gz
Predicted (gpumembench, simulated device): the request of 991232000 bytes at event 11 fails with
7247757312 bytes allocated and 8053063680 bytes reserved, largest free block 805306368 bytes.

Usage: python3 repro_torch.py [--alloc-conf STR] [--contrast]
Exit status: 1 the OOM happened at the predicted event (reproduced); 0 no OOM; 2 an OOM at another
event; 3 cannot run here (no GPU, not enough free memory, torch already initialised CUDA).
"""
import argparse
import math
import os
import sys

ALLOC_CONF = ""  # PYTORCH_CUDA_ALLOC_CONF of the OOM
CONTRAST_ALLOC_CONF = "expandable_segments:True"  # settings under which the same events must not OOM (None: none)
LIMIT_BYTES = 8858370048  # what the allocator may reserve
OOM_EVENT = 11  # the event whose allocation fails (0-based)
PREDICTED = {"allocated": 7247757312, "reserved": 8053063680, "largest_free_block": 805306368}
# (kind, id, bytes, stream): kind 0 allocates `bytes` as buffer `id`, kind 1 frees buffer `id`.
EVENTS = [
    (0, 0, 3221225472, 0), (0, 1, 536870912, 1), (0, 2, 268435456, 1), (1, 1, 0, 1),
    (1, 2, 0, 1), (0, 3, 1073741824, 1), (1, 3, 0, 1), (0, 4, 536870912, 1),
    (0, 5, 268435456, 1), (0, 6, 268435456, 1), (0, 7, 2952790016, 1), (0, 8, 991232000, 1),
]


def fraction_for(limit, total):
    """The fraction f with int(f * total) == limit, as PyTorch computes allowed_memory_maximum."""
    f = (limit + 0.5) / total
    for _ in range(64):
        got = int(f * total)
        if got == limit:
            return f
        f = math.nextafter(f, 2.0 if got < limit else 0.0)
    raise SystemExit("cannot express %d bytes as a fraction of %d" % (limit, total))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alloc-conf", default=None, help="PYTORCH_CUDA_ALLOC_CONF to use instead of ALLOC_CONF")
    ap.add_argument("--contrast", action="store_true", help="run under CONTRAST_ALLOC_CONF (expect no OOM)")
    args = ap.parse_args()
    conf = ALLOC_CONF
    if args.contrast:
        if CONTRAST_ALLOC_CONF is None:
            print("this reproducer has no contrast settings")
            return 3
        conf = CONTRAST_ALLOC_CONF
    if args.alloc_conf is not None:
        conf = args.alloc_conf
    if "torch" in sys.modules:
        print("torch was imported before the settings could be set")
        return 3
    # Read when PyTorch initialises CUDA: it must be set before.
    if conf:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf
    else:
        os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed here (import torch failed)")
        return 3

    if not torch.cuda.is_available():
        print("no CUDA device visible")
        return 3
    torch.cuda.init()
    total = torch.cuda.get_device_properties(0).total_memory
    free, _ = torch.cuda.mem_get_info(0)  # after the CUDA context took its share
    if free < LIMIT_BYTES:
        print("only %d bytes free on the card, %d needed" % (free, LIMIT_BYTES))
        return 3
    if torch.cuda.memory_reserved(0) != 0:
        print("PyTorch already holds %d bytes" % torch.cuda.memory_reserved(0))
        return 3
    # The limit is fraction x total_memory (not x the free memory): the CUDA context is not counted.
    torch.cuda.set_per_process_memory_fraction(fraction_for(LIMIT_BYTES, total), 0)
    print("torch %s, %s, total %d bytes, limit %d bytes, PYTORCH_CUDA_ALLOC_CONF=%r, %d events"
          % (torch.__version__, torch.cuda.get_device_name(0), total, LIMIT_BYTES, conf, len(EVENTS)))
    streams = {0: torch.cuda.current_stream(0)}
    live = {}
    for i, (kind, buf, size, stream) in enumerate(EVENTS):
        if kind == 1:
            torch.cuda.caching_allocator_delete(live.pop(buf))
            continue
        if stream not in streams:
            streams[stream] = torch.cuda.Stream(0)
        try:
            live[buf] = torch.cuda.caching_allocator_alloc(size, 0, streams[stream])
        except torch.cuda.OutOfMemoryError as e:
            stats = torch.cuda.memory_stats(0)
            print("OOM at event %d: %d bytes requested" % (i, size))
            print(str(e).splitlines()[0])
            print(torch.cuda.memory_summary(0))
            print("allocated %d (predicted %d), reserved %d (predicted %d)"
                  % (stats["allocated_bytes.all.current"], PREDICTED["allocated"],
                     stats["reserved_bytes.all.current"], PREDICTED["reserved"]))
            if i == OOM_EVENT:
                print("REPRODUCED: the OOM happened at the predicted event %d" % OOM_EVENT)
                return 1
            print("OOM ELSEWHERE: at event %d, predicted %d" % (i, OOM_EVENT))
            return 2
    print(torch.cuda.memory_summary(0))
    if args.contrast:
        print("NO OOM: all %d events ran under the contrast settings %r, as predicted" % (len(EVENTS), conf))
    else:
        print("NO OOM: all %d events ran under %r (predicted: an OOM at event %d under %r)"
              % (len(EVENTS), conf, OOM_EVENT, ALLOC_CONF))
    return 0


if __name__ == "__main__":
    sys.exit(main())
