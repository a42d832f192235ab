#!/usr/bin/env python3
"""Deterministic generator of the reference allocation traces for the caching allocator.

Writes traces in gpumembench's native trace CSV format

    action,id,bytes,stream
    alloc,0,104857600,0
    free,0,,0

and a manifest ``cases.json`` naming, for every reference case, the trace, the
PYTORCH_CUDA_ALLOC_CONF string, the memory limit (bytes or null) and a description.
The traces are replayed through real PyTorch by scripts/torch_reference.py and through
gpumembench's ``caching`` allocator by the fidelity test.

Rules the traces follow (and a replayer must honour):
  * ids are unique per alloc and never reused;
  * a block is freed on the stream that allocated it (the free row repeats that stream);
  * an alloc that runs out of memory leaves its id unallocated; a later free of that id
    must be skipped (traces meant to OOM under a limit rely on this);
  * blocks still live at the end of a trace are left live (the replayer snapshots the
    segments, then frees them);
  * a row ``empty_cache,,,0`` calls torch.cuda.empty_cache() (the allocator's empty_cache());
    only the reference replayers read it, gpumembench's trace reader does not.

Standard library only (no torch, no numpy): everything is seeded, the output is the same
on every machine and Python version >= 3.8.

    python3 scripts/gen_reference_traces.py OUT_DIR
"""

import argparse
import json
import math
import os
import random
import sys

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

SCHEMA_VERSION = 1


class Trace:
    """An allocation trace under construction."""

    def __init__(self, name, description):
        self.name = name
        self.description = description
        self.rows = []  # (action, id, bytes or None, stream)
        self.next_id = 0
        self.live = {}  # id -> (bytes, stream); ids the trace believes are live
        self.live_bytes = 0
        self.peak_live_bytes = 0

    def alloc(self, nbytes, stream=0):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise ValueError("%s: alloc of %d bytes" % (self.name, nbytes))
        i = self.next_id
        self.next_id += 1
        self.rows.append(("alloc", i, nbytes, stream))
        self.live[i] = (nbytes, stream)
        self.live_bytes += nbytes
        self.peak_live_bytes = max(self.peak_live_bytes, self.live_bytes)
        return i

    def free(self, i):
        nbytes, stream = self.live.pop(i)
        self.live_bytes -= nbytes
        self.rows.append(("free", i, None, stream))

    def empty_cache(self):
        self.rows.append(("empty_cache", None, None, 0))

    def free_all(self, order="lifo"):
        ids = sorted(self.live)
        if order == "lifo":
            ids.reverse()
        for i in ids:
            self.free(i)

    def __len__(self):
        return len(self.rows)

    def write(self, path):
        with open(path, "w", newline="\n") as f:
            f.write("action,id,bytes,stream\n")
            for action, i, nbytes, stream in self.rows:
                if action == "alloc":
                    f.write("alloc,%d,%d,%d\n" % (i, nbytes, stream))
                elif action == "empty_cache":
                    f.write("empty_cache,,,0\n")
                else:
                    f.write("free,%d,,%d\n" % (i, stream))

    def stats(self):
        allocs = [r for r in self.rows if r[0] == "alloc"]
        sizes = [r[2] for r in allocs]
        streams = sorted(set(r[3] for r in self.rows))
        n_ec = sum(1 for r in self.rows if r[0] == "empty_cache")
        return {
            "events": len(self.rows),
            "allocs": len(allocs),
            "frees": len(self.rows) - len(allocs) - n_ec,
            "empty_cache": n_ec,
            "min_bytes": min(sizes) if sizes else 0,
            "max_bytes": max(sizes) if sizes else 0,
            "total_alloc_bytes": sum(sizes),
            "peak_live_bytes": self.peak_live_bytes,
            "live_at_end": len(self.live),
            "streams": streams,
        }


# ----------------------------------------------------------------------------------------
# size samplers: each takes a random.Random and returns a size in bytes (>= 1)

# sizes on and around the thresholds of PyTorch's caching allocator: 512 B rounding,
# 1 MiB small/large pool limit, 2 MiB small segment, 10 MiB (kMinLargeAlloc),
# 20 MiB (kLargeBuffer), and the max_split_size_mb values used by the cases (40, 64, 128).
BOUNDARY_SIZES = sorted(set(
    [1, 2, 511, 512, 513, 1023, 1024, 1025, 4095, 4096, 4097, 65535, 65536, 65537,
     MiB // 2, MiB - 512, MiB - 1, MiB, MiB + 1, MiB + 512, 2 * MiB - 1, 2 * MiB,
     2 * MiB + 1, 10 * MiB - 1, 10 * MiB, 10 * MiB + 1, 20 * MiB - 1, 20 * MiB,
     20 * MiB + 1, 40 * MiB - 1, 40 * MiB, 40 * MiB + 1, 64 * MiB - 1, 64 * MiB,
     64 * MiB + 1, 128 * MiB - 1, 128 * MiB, 128 * MiB + 1, 256 * MiB, 256 * MiB + 1,
     512 * MiB, 512 * MiB + 1, GiB, GiB + 1]))


def log_uniform(rng, lo, hi):
    """Integer in [lo, hi], log-uniformly distributed."""
    v = int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))
    return max(lo, min(hi, v))


def small_size(rng):
    """1 B .. 1 MiB: uniform, log-uniform, 512-multiples, odd sizes and the boundaries."""
    r = rng.random()
    if r < 0.30:
        return log_uniform(rng, 1, MiB)
    if r < 0.50:
        return rng.randint(1, MiB)
    if r < 0.70:
        return 512 * rng.randint(1, MiB // 512)
    if r < 0.85:
        return 512 * rng.randint(0, MiB // 512 - 1) + rng.randint(1, 511)  # not multiple of 512
    return rng.choice([1, 511, 512, 513, 4096, 65536, MiB // 2, MiB - 1, MiB, MiB])


def large1_size(rng):
    """> 1 MiB .. 10 MiB (plus the exact 1 MiB + 1 boundary)."""
    r = rng.random()
    if r < 0.08:
        return rng.choice([MiB + 1, 2 * MiB, 2 * MiB + 1, 10 * MiB - 1, 10 * MiB])
    if r < 0.55:
        return log_uniform(rng, MiB + 1, 10 * MiB)
    if r < 0.80:
        return rng.randint(MiB + 1, 10 * MiB)
    return 512 * rng.randint(MiB // 512 + 1, 10 * MiB // 512)


def large2_size(rng):
    """10 MiB .. 100 MiB."""
    r = rng.random()
    if r < 0.08:
        return rng.choice([10 * MiB + 1, 20 * MiB, 20 * MiB + 1, 40 * MiB, 40 * MiB + 1,
                           64 * MiB, 64 * MiB + 1, 100 * MiB])
    if r < 0.6:
        return log_uniform(rng, 10 * MiB + 1, 100 * MiB)
    return 2 * MiB * rng.randint(5, 50) + rng.choice([0, 0, 1, 512, rng.randint(1, MiB)])


def huge_size(rng, hi=2 * GiB):
    """100 MiB .. 2 GiB."""
    r = rng.random()
    if r < 0.1:
        return rng.choice([128 * MiB, 128 * MiB + 1, 256 * MiB, 512 * MiB, GiB, GiB + 1,
                           min(hi, 2 * GiB)])
    if r < 0.7:
        return log_uniform(rng, 100 * MiB, hi)
    return rng.randint(100 * MiB, hi)


def mixture(weights):
    """A sampler picking one of several samplers with the given weights."""
    total = float(sum(w for w, _ in weights))

    def sample(rng):
        x = rng.random() * total
        for w, f in weights:
            x -= w
            if x < 0:
                return f(rng)
        return weights[-1][1](rng)
    return sample


# ----------------------------------------------------------------------------------------
# trace builders

def random_mix(name, description, seed, events, sampler, live_target, byte_budget,
               streams=(0,), stream_weights=None, lifo_bias=0.3, end_free_fraction=0.5):
    """Random allocations and frees.

    live_target(step) -> wanted number of live blocks (drifts over the trace);
    byte_budget: an alloc that would take the live bytes past it is replaced by a free,
    unless the trace is meant to OOM (byte_budget=None).
    """
    rng = random.Random(seed)
    t = Trace(name, description)
    order = []  # live ids in allocation order (for LIFO-biased frees)
    while len(t) < events:
        step = len(t)
        target = live_target(step)
        n_live = len(t.live)
        p_alloc = 0.75 if n_live < target else 0.25
        if n_live == 0 or rng.random() < p_alloc:
            size = sampler(rng)
            if byte_budget is not None and t.live_bytes + size > byte_budget and n_live:
                pass  # fall through to a free
            else:
                s = rng.choices(streams, weights=stream_weights)[0]
                order.append(t.alloc(size, s))
                continue
        # free: most recent with probability lifo_bias, otherwise uniform among live
        if rng.random() < lifo_bias:
            i = order.pop()
        else:
            i = order.pop(rng.randrange(len(order)))
        t.free(i)
    # free part of what is left, in random order, so the end state has holes
    rng.shuffle(order)
    for i in order[: int(len(order) * end_free_fraction)]:
        t.free(i)
    return t


def drift(lo, hi, period, phase=0.0):
    """A live-set target that drifts between lo and hi (sine with the given period)."""
    def f(step):
        return lo + (hi - lo) * 0.5 * (1 + math.sin(2 * math.pi * (step / period) + phase))
    return f


def hole_basic():
    t = Trace("hole_basic", "100/200/300 MiB, free the 200, ask 250 MiB (the canonical hole)")
    t.alloc(100 * MiB)
    b = t.alloc(200 * MiB)
    t.alloc(300 * MiB)
    t.free(b)
    t.alloc(250 * MiB)
    return t


def hole_variants(seed=11):
    """Many hole patterns: a, b, c allocated, b freed, d asked, with d <, =, > b, sizes
    scaled and perturbed (odd bytes), sometimes in the small pool, sometimes with the rest
    kept live so later patterns see the earlier holes."""
    rng = random.Random(seed)
    t = Trace("hole_variants", "hole pattern variants: (a,b,c) allocated, b freed, d asked; "
              "d below/equal/above b, units 16 KiB..512 MiB, odd sizes, partial keeps")
    scales = [MiB // 64, MiB // 4, MiB, 2 * MiB, 10 * MiB, 20 * MiB, 100 * MiB, 512 * MiB]
    base = [(1, 2, 3, 2.5), (1, 2, 3, 2), (1, 2, 3, 1.5), (1, 2, 3, 3), (3, 2, 1, 2.5),
            (2, 2, 2, 1), (1, 3, 1, 2.9), (1, 2, 3, 0.5)]
    for rep in range(1):
        for unit in scales:
            for a, b, c, d in base:
                jitter = lambda x: max(1, int(x * unit) + rng.choice([0, 0, 1, -1, 511, 4097]))
                ia = t.alloc(jitter(a))
                ib = t.alloc(jitter(b))
                ic = t.alloc(jitter(c))
                t.free(ib)
                idd = t.alloc(jitter(d))
                # keep some of them so later patterns interact with these holes
                keep = rng.random() < 0.25 and unit <= 20 * MiB
                if not keep:
                    for i in rng.sample([ia, ic, idd], 3):
                        t.free(i)
            if t.live_bytes > 2 * GiB:
                t.free_all(order="fifo")
    return t


def transformer(name, description, seed, steps, layers, hidden, heads, batch, seq_lo, seq_hi,
                seq_mode="uniform", dtype_bytes=2, vocab=32000, streams=(0,), comm_stream=None):
    """A training-like trace.

    Persistent parameters (and their gradients, created at the first backward). Per step
    a sequence length is drawn; forward allocates per-layer saved activations whose sizes
    scale with the sequence length (attention scores with its square) plus short-lived
    temporaries; backward frees the activations in reverse order while allocating and
    freeing gradient temporaries. With comm_stream, gradient buckets are allocated on that
    stream (all-reduce buffers) and freed there.
    """
    rng = random.Random(seed)
    t = Trace(name, description)
    h = hidden
    params = []
    # embeddings and per-layer weights (and small biases / norms in the small pool)
    params.append(t.alloc(vocab * h * dtype_bytes))
    for _ in range(layers):
        params.append(t.alloc(3 * h * h * dtype_bytes))  # qkv
        params.append(t.alloc(3 * h * dtype_bytes))  # qkv bias (small)
        params.append(t.alloc(h * h * dtype_bytes))  # out proj
        params.append(t.alloc(h * 4))  # layer norm (fp32, small)
        params.append(t.alloc(4 * h * h * dtype_bytes))  # mlp up
        params.append(t.alloc(4 * h * h * dtype_bytes))  # mlp down
    grads = None
    prev_seq = (seq_lo + seq_hi) // 2
    for step in range(steps):
        if seq_mode == "uniform":
            s = rng.randint(seq_lo, seq_hi)
        elif seq_mode == "walk":
            s = max(seq_lo, min(seq_hi, prev_seq + rng.randint(-(seq_hi - seq_lo) // 8,
                                                                (seq_hi - seq_lo) // 8)))
        elif seq_mode == "fixed":
            s = seq_hi
        elif seq_mode == "bucket":
            s = rng.choice([seq_lo, (seq_lo + seq_hi) // 2, seq_hi])
        else:
            raise ValueError(seq_mode)
        prev_seq = s
        tok = batch * s
        saved = []
        x = t.alloc(tok * h * dtype_bytes)  # embedding output
        saved.append(x)
        saved.append(t.alloc(tok * 8))  # token ids (int64)
        for _ in range(layers):
            ln = t.alloc(tok * h * dtype_bytes)
            saved.append(ln)
            saved.append(t.alloc(tok * 4))  # layer norm stats (fp32 per token)
            qkv = t.alloc(tok * 3 * h * dtype_bytes)
            saved.append(qkv)
            scores = t.alloc(batch * heads * s * s * dtype_bytes)
            probs = t.alloc(batch * heads * s * s * dtype_bytes)
            t.free(scores)  # softmax in a new buffer; scores are dropped
            saved.append(probs)
            attn = t.alloc(tok * h * dtype_bytes)
            saved.append(attn)
            up = t.alloc(tok * 4 * h * dtype_bytes)
            saved.append(up)
            act = t.alloc(tok * 4 * h * dtype_bytes)
            saved.append(act)
            out = t.alloc(tok * h * dtype_bytes)
            saved.append(out)
        logits = t.alloc(tok * vocab * dtype_bytes // 8)  # a vocab shard
        loss = t.alloc(4)
        t.free(logits)
        first_backward = grads is None
        if first_backward:
            grads = []
        # backward: free saved activations in reverse, gradient temporaries in between
        g = t.alloc(tok * h * dtype_bytes)
        for k, i in enumerate(reversed(saved)):
            nbytes = t.live[i][0]
            tmp = t.alloc(nbytes)
            t.free(g)
            g = tmp
            t.free(i)
            if k % 9 == 8 and first_backward:
                # gradients of one layer's parameters appear during its backward
                pass
        t.free(g)
        t.free(loss)
        if first_backward:
            for p in params:
                grads.append(t.alloc(t.live[p][0]))
        if comm_stream is not None:
            # all-reduce buckets on the communication stream
            bucket = 25 * MiB
            total = sum(t.live[p][0] for p in params)
            buckets = []
            while total > 0:
                n = min(bucket, total)
                buckets.append(t.alloc(n, comm_stream))
                total -= n
                if len(buckets) >= 2:
                    t.free(buckets.pop(0))
            for b in buckets:
                t.free(b)
        # optimizer: a few small scalars per step
        for _ in range(4):
            t.free(t.alloc(rng.choice([4, 8, 512, 1024])))
    return t


def pressure(name, description, seed, events, sampler, target_bytes, streams=(0,),
             stream_weights=None):
    """A trace meant to OOM under a limit: it keeps asking until its *believed* live bytes
    reach target_bytes (well above the limit), frees randomly, and frees ids whose alloc
    may have failed (the replayer skips those)."""
    rng = random.Random(seed)
    t = Trace(name, description)
    order = []
    while len(t) < events:
        if not order or (t.live_bytes < target_bytes and rng.random() < 0.65):
            s = rng.choices(streams, weights=stream_weights)[0]
            order.append(t.alloc(sampler(rng), s))
        else:
            i = order.pop(rng.randrange(len(order)) if rng.random() < 0.7 else -1)
            t.free(i)
    return t


def fragmentation_oom(name, seed, rounds, unit, big_factor):
    """Many medium blocks, every other one freed, then a request bigger than any hole:
    under a limit this OOMs although the free bytes would hold it (fragmentation);
    repeated with varying sizes."""
    rng = random.Random(seed)
    t = Trace(name, "fragmentation: fill with medium blocks, free every other one, ask for a "
              "block larger than any hole; repeated %d rounds" % rounds)
    for r in range(rounds):
        ids = [t.alloc(unit + rng.choice([0, 1, 512, rng.randint(0, unit // 4)]))
               for _ in range(rng.randint(12, 30))]
        for i in ids[::2]:
            t.free(i)
        big = [t.alloc(int(unit * big_factor * rng.uniform(0.8, 1.5))) for _ in range(3)]
        small = [t.alloc(rng.randint(1, unit)) for _ in range(5)]
        for i in big + small:
            t.free(i)
        for i in ids[1::2]:
            if rng.random() < 0.8:
                t.free(i)
    return t


def with_empty_cache(t, every):
    """The trace with an empty_cache row after every `every` rows (at least one, mid-run)."""
    rows = []
    for k, row in enumerate(t.rows, 1):
        rows.append(row)
        if k % every == 0 and k < len(t.rows):
            rows.append(("empty_cache", None, None, 0))
    t.rows = rows
    return t


def boundaries(seed=7):
    """Every boundary size alone, in pairs and with splits, on one stream."""
    rng = random.Random(seed)
    t = Trace("boundaries", "sizes on and around the allocator's thresholds (512 B rounding, "
              "1 MiB, 2 MiB, 10 MiB, 20 MiB, 40/64/128 MiB split limits, 1 GiB), alone and mixed")
    for sz in BOUNDARY_SIZES:
        i = t.alloc(sz)
        t.free(i)
    for sz in BOUNDARY_SIZES:
        t.alloc(sz)
    # free the odd positions, then ask for every size again (reuse of exact / nearby holes)
    live = sorted(t.live)
    for i in live[1::2]:
        t.free(i)
    order = list(BOUNDARY_SIZES)
    rng.shuffle(order)
    for sz in order:
        t.alloc(sz)
    t.free_all(order="fifo")
    for _ in range(6):
        ids = [t.alloc(rng.choice(BOUNDARY_SIZES)) for _ in range(40)]
        rng.shuffle(ids)
        for i in ids[:30]:
            t.free(i)
    return t



def hole_streams(seed=13):
    """Hole patterns across two streams: a block freed on stream 0 cannot serve stream 1."""
    rng = random.Random(seed)
    t = Trace("hole_streams", "hole patterns across streams 0 and 1: holes left on one "
              "stream, requests on the other, then on the same stream")
    for unit in [MiB // 8, MiB, 4 * MiB, 20 * MiB, 100 * MiB]:
        for _ in range(6):
            s0, s1 = rng.choice([(0, 1), (1, 0)])
            ia = t.alloc(unit + rng.randint(0, 511), s0)
            ib = t.alloc(2 * unit + rng.choice([0, 1, 512]), s0)
            ic = t.alloc(3 * unit, s0)
            t.free(ib)
            i1 = t.alloc(int(2.5 * unit) if unit >= MiB else 2 * unit, s1)
            i2 = t.alloc(int(1.5 * unit), s0)
            for i in rng.sample([ia, ic, i1, i2], 4):
                t.free(i)
    return t


def small_fill(seed=17):
    """Thousands of tiny blocks (1 B, 512 B, odd sizes) filling 2 MiB small segments,
    every other one freed, then refilled with slightly larger sizes."""
    rng = random.Random(seed)
    t = Trace("small_fill", "small-pool packing: 1 B / 512 B / odd-size blocks filling 2 MiB "
              "segments, every other freed, refilled with larger sizes")
    ids = [t.alloc(rng.choice([1, 1, 512, 513, 1000, 4096, 8191])) for _ in range(300)]
    for i in ids[::2]:
        t.free(i)
    ids2 = [t.alloc(rng.choice([600, 1024, 4097, 65536, 131072 + 1])) for _ in range(150)]
    for i in ids[1::2]:
        t.free(i)
    big = [t.alloc(rng.choice([MiB - 1, MiB, 700 * KiB])) for _ in range(20)]
    for i in ids2[::3] + big[::2]:
        t.free(i)
    return t


def limit_edge():
    """Requests that land exactly on, just under and just over a 1 GiB limit (reserved
    bytes, 2 MiB rounding, 20 MiB segments), to be replayed with limit_bytes = 1 GiB."""
    t = Trace("limit_edge", "requests exactly at, just under and just over a 1 GiB limit "
              "(meant for limit 1 GiB)")
    for first in [512 * MiB, 1000 * MiB, GiB - 2 * MiB, GiB - 20 * MiB]:
        a = t.alloc(first)
        rest = GiB - first
        for d in [rest + 1, rest, rest - 1, rest - 2 * MiB, rest - 2 * MiB + 1, rest - 20 * MiB,
                  MiB, 10 * MiB, 2 * MiB + 1, 1]:
            if d <= 0:
                continue
            i = t.alloc(d)
            t.free(i)
        b = t.alloc(max(1, rest // 2))
        c = t.alloc(max(1, rest // 2))
        d2 = t.alloc(max(1, rest // 4))  # may OOM
        for i in [b, c, d2, a]:
            t.free(i)
    for k in range(1, 9):
        ids = [t.alloc(GiB // k - 512 * j) for j in range(k + 1)]  # the last one OOMs
        for i in ids:
            t.free(i)
    return t


# ----------------------------------------------------------------------------------------

def build_traces():
    traces = []
    add = traces.append

    add(hole_basic())
    add(hole_variants())
    add(boundaries())
    add(hole_streams())
    add(small_fill())
    add(limit_edge())

    small = small_size
    mix_all = mixture([(70, small_size), (15, large1_size), (10, large2_size),
                       (5, huge_size)])
    mix_medium = mixture([(60, small_size), (25, large1_size), (15, large2_size)])

    add(random_mix("mix_small_a", "small sizes only (1 B..1 MiB, odd sizes, 1 MiB boundary), "
                   "live set drifting 50..600 blocks", 101, 1500, small, drift(50, 500, 900),
                   2 * GiB))
    add(random_mix("mix_small_b", "small sizes only, live set drifting 5..150 blocks, "
                   "mostly uniform frees", 102, 1000, small, drift(5, 150, 400, 1.0), 2 * GiB,
                   lifo_bias=0.05))
    add(random_mix("mix_large1", "large sizes 1..10 MiB, live set drifting 20..300", 103, 1200,
                   large1_size, drift(20, 300, 700), 8 * GiB))
    add(random_mix("mix_large2", "large sizes 10..100 MiB, live set drifting 10..120", 104,
                   1200, large2_size, drift(10, 120, 500), 12 * GiB))
    add(random_mix("mix_huge", "huge sizes 100 MiB..2 GiB, live set drifting 2..12 blocks "
                   "(<= 16 GiB live)", 105, 400, huge_size, drift(2, 12, 200), 16 * GiB))
    add(random_mix("mix_all_a", "mix of small/large/huge (70/15/10/5 %), live set drifting "
                   "20..400", 106, 1500, mix_all, drift(20, 400, 800), 16 * GiB))
    add(random_mix("mix_all_b", "mix of small/large/huge, LIFO-heavy frees, live set "
                   "drifting 5..100", 107, 1000, mix_all, drift(5, 100, 400, 2.0), 16 * GiB,
                   lifo_bias=0.8))
    add(random_mix("mix_medium", "small and large (up to 100 MiB), live 50..500", 108, 1200,
                   mix_medium, drift(50, 400, 1000, 0.5), 12 * GiB))

    add(transformer("xf_varseq", "transformer-like, 6 layers, hidden 1024, batch 4, sequence "
                    "length uniform 128..2048 per step", 201, 6, 6, 1024, 16, 4, 128, 2048))
    add(transformer("xf_walk", "transformer-like, 4 layers, hidden 2048, batch 2, sequence "
                    "length random walk 256..4096", 202, 7, 4, 2048, 16, 2, 256, 4096,
                    seq_mode="walk"))
    add(transformer("xf_fixed", "transformer-like, fixed sequence length 1024 (control case)",
                    203, 4, 6, 1024, 16, 4, 1024, 1024, seq_mode="fixed"))
    add(transformer("xf_small", "small transformer-like (hidden 256, seq 16..256): mostly "
                    "small-pool activations", 204, 8, 4, 256, 4, 2, 16, 256))
    add(transformer("xf_bucket", "transformer-like, sequence length from 3 buckets "
                    "(512, 1280, 2048)", 205, 5, 6, 1024, 16, 4, 512, 2048, seq_mode="bucket"))

    add(random_mix("two_stream_mix", "two streams (70 % on 0, 30 % on 1), mix of "
                   "small/large/huge, live 20..300", 301, 1200, mix_all, drift(20, 300, 600),
                   12 * GiB, streams=(0, 1), stream_weights=(7, 3)))
    add(random_mix("two_stream_small", "two streams, half/half, small and large sizes, "
                   "live 10..200", 302, 1000, mix_medium, drift(10, 200, 400), 8 * GiB,
                   streams=(0, 1)))
    add(transformer("two_stream_xf", "transformer-like on stream 0, gradient all-reduce "
                    "buckets (25 MiB) on stream 1", 303, 5, 4, 1024, 16, 4, 256, 1536,
                    comm_stream=1))

    # meant to be replayed under a memory limit (OOM again and again)
    add(pressure("oom_huge", "huge sizes, believed live set up to 40 GiB: under a limit of a "
                 "few GiB most big requests OOM; frees of failed ids are skipped", 401, 500,
                 huge_size, 40 * GiB))
    add(pressure("oom_mix", "mix of small/large/huge, believed live set up to 24 GiB, for "
                 "limits of 2..8 GiB", 402, 1000, mix_all, 24 * GiB))
    add(pressure("oom_large", "10..100 MiB sizes, believed live set up to 6 GiB, for a "
                 "1..2 GiB limit", 403, 1000, large2_size, 6 * GiB))
    add(pressure("oom_small", "small and 1..10 MiB sizes, believed live set up to 1 GiB, for "
                 "limits of 128..512 MiB", 404, 1200, mixture([(70, small_size),
                                                               (30, large1_size)]), GiB))
    add(pressure("oom_two_stream", "two streams, mix of sizes, believed live set up to 16 GiB",
                 405, 1000, mix_all, 16 * GiB, streams=(0, 1)))
    add(fragmentation_oom("oom_frag", 406, 20, 64 * MiB, 4.0))
    add(fragmentation_oom("oom_frag_small", 407, 20, 3 * MiB, 6.0))
    add(transformer("oom_xf", "transformer-like with sequence lengths 512..4096: under a limit "
                    "the long steps OOM", 408, 5, 4, 1024, 16, 4, 512, 4096))

    # expandable segments under a memory cap that the run keeps hitting: OOM, release the
    # cache (unmapping free pages), retry; empty_cache mid-run in the *_ec traces
    mix_heavy = mixture([(50, small_size), (20, large1_size), (15, large2_size),
                         (15, huge_size)])
    huge_heavy = mixture([(30, small_size), (20, large2_size), (50, huge_size)])
    add(pressure("es_press_a", "small/large/huge (50/20/15/15 %), believed live set up to "
                 "16 GiB, for limits of 5..6 GiB", 501, 1500, mix_heavy, 16 * GiB))
    add(pressure("es_press_b", "small/large/huge (50/20/15/15 %), believed live set up to "
                 "8 GiB, for limits of 2..3 GiB", 502, 1500, mix_heavy, 8 * GiB))
    add(pressure("es_press_c", "mostly huge sizes (30/20/50 % small/10..100 MiB/huge), "
                 "believed live set up to 30 GiB, for a 10 GiB limit", 503, 1200, huge_heavy,
                 30 * GiB))
    add(with_empty_cache(pressure("es_press_ec", "small/large/huge, believed live set up to "
                                  "14 GiB, empty_cache every 125 events", 504, 1500, mix_heavy,
                                  14 * GiB), 125))
    add(pressure("es_press_2s", "two streams, small/large/huge, believed live set up to "
                 "16 GiB", 505, 1500, mix_heavy, 16 * GiB, streams=(0, 1)))
    add(transformer("es_xf_dyn", "transformer-like, 6 layers, hidden 1536, batch 4, sequence "
                    "length uniform 256..4096 per step (long steps pass 8-10 GiB)", 506, 10, 6,
                    1536, 16, 4, 256, 4096))
    add(with_empty_cache(transformer("es_xf_dyn_ec", "transformer-like, 6 layers, hidden 1024, "
                                     "batch 4, sequence length uniform 512..4096, empty_cache "
                                     "every 300 events", 507, 10, 6, 1024, 16, 4, 512, 4096),
                         300))
    add(transformer("es_xf_walk", "transformer-like, 4 layers, hidden 2048, batch 2, sequence "
                    "length random walk 512..6144", 508, 10, 4, 2048, 16, 2, 512, 6144,
                    seq_mode="walk"))
    return {t.name: t for t in traces}


# Limits (bytes). Multiples of 2 MiB; the replayer records the exact limit PyTorch applies.
def gib(x):
    return int(x * GiB)


ES = "expandable_segments:True"
RP_LIST = "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"


def build_cases(traces):
    """(case name, trace, alloc_conf, limit_bytes or None, description)."""
    C = []

    def case(name, trace, conf, limit, desc):
        assert trace in traces, trace
        C.append({"name": name, "trace": trace + ".csv", "alloc_conf": conf,
                  "limit_bytes": limit, "description": desc})

    # default configuration, no limit: every trace that is not meant to OOM
    for tr in ["hole_basic", "hole_variants", "hole_streams", "boundaries", "small_fill",
               "mix_small_a", "mix_small_b", "mix_large1", "mix_large2", "mix_huge",
               "mix_all_a", "mix_all_b", "mix_medium", "xf_varseq", "xf_walk", "xf_fixed",
               "xf_small", "xf_bucket", "two_stream_mix", "two_stream_small", "two_stream_xf"]:
        case("default__" + tr, tr, "", None, "default options, no limit: " +
             traces[tr].description)
    # default configuration under limits: OOM again and again
    case("default__hole_basic__700m", "hole_basic", "", 700 * MiB, "default, limit 700 MiB: "
         "the 250 MiB request fits only after the cached 200 MiB block is released (a retry)")
    case("default__hole_basic__640m", "hole_basic", "", 640 * MiB, "default, limit 640 MiB: "
         "the 250 MiB request OOMs even after the cached 200 MiB block is released")
    case("default__limit_edge__1g", "limit_edge", "", gib(1), "default, limit 1 GiB, "
         "requests at the limit's edge")
    case("default__oom_huge__4g", "oom_huge", "", gib(4), "default, limit 4 GiB, huge sizes")
    case("default__oom_mix__3g", "oom_mix", "", gib(3), "default, limit 3 GiB, mixed sizes")
    case("default__oom_large__1g", "oom_large", "", gib(1), "default, limit 1 GiB")
    case("default__oom_small__256m", "oom_small", "", 256 * MiB, "default, limit 256 MiB, "
         "small and 1..10 MiB sizes")
    case("default__oom_two_stream__2g", "oom_two_stream", "", gib(2), "default, limit 2 GiB, "
         "two streams")
    case("default__oom_frag__1g", "oom_frag", "", gib(1), "default, limit 1 GiB, "
         "fragmentation OOMs")
    case("default__oom_frag_small__96m", "oom_frag_small", "", 96 * MiB, "default, limit "
         "96 MiB, fragmentation OOMs with 3 MiB units")
    case("default__oom_xf__6g", "oom_xf", "", gib(6), "default, limit 6 GiB, transformer with "
         "long sequences")

    # max_split_size_mb
    ms = "max_split_size_mb:128"
    case("msplit128__hole_variants", "hole_variants", ms, None, ms + ": hole variants")
    case("msplit128__mix_all_a", "mix_all_a", ms, None, ms + ": " + traces["mix_all_a"].description)
    case("msplit128__oom_mix__3g", "oom_mix", ms, gib(3), ms + ", limit 3 GiB")
    ms = "max_split_size_mb:40"
    case("msplit40__mix_large2", "mix_large2", ms, None, ms + ": 10..100 MiB sizes")
    case("msplit40__oom_frag__1g", "oom_frag", ms, gib(1), ms + ", limit 1 GiB, fragmentation")

    # max_non_split_rounding_mb (acts on blocks >= max_split_size)
    conf = "max_split_size_mb:64,max_non_split_rounding_mb:256"
    case("msplit64_nsr256__mix_huge", "mix_huge", conf, None, conf + ": huge sizes")
    case("msplit64_nsr256__oom_huge__4g", "oom_huge", conf, gib(4), conf + ", limit 4 GiB")
    case("nsr64__mix_large2", "mix_large2", "max_non_split_rounding_mb:64", None,
         "max_non_split_rounding_mb:64 alone (max_split_size unlimited)")

    # roundup_power2_divisions
    rp = "roundup_power2_divisions:4"
    case("rp4__mix_small_a", "mix_small_a", rp, None, rp + ": small sizes")
    case("rp4__xf_varseq", "xf_varseq", rp, None, rp + ": transformer, varying sequence length")
    case("rp4__oom_mix__3g", "oom_mix", rp, gib(3), rp + ", limit 3 GiB")
    case("rplist__boundaries", "boundaries", RP_LIST, None, RP_LIST + ": boundary sizes")
    case("rplist__xf_bucket", "xf_bucket", RP_LIST, None, RP_LIST + ": bucketed seq lengths")

    # garbage_collection_threshold (acts only with a memory fraction set)
    gc = "garbage_collection_threshold:0.6"
    case("gc06__mix_large2__6g", "mix_large2", gc, gib(6), gc + ", limit 6 GiB (live set peaks at 5.7 GiB)")
    case("gc06__oom_mix__3g", "oom_mix", gc, gib(3), gc + ", limit 3 GiB, OOMs")
    case("gc06__mix_medium", "mix_medium", gc, None, gc + " without a limit (inert: acts only "
         "with a memory fraction)")

    # expandable segments
    for tr in ["hole_basic", "hole_variants", "mix_all_a", "xf_varseq", "two_stream_mix"]:
        case("es__" + tr, tr, ES, None, ES + ": " + traces[tr].description)
    case("es__limit_edge__1g", "limit_edge", ES, gib(1), ES + ", limit 1 GiB, limit edge")
    case("es__oom_huge__4g", "oom_huge", ES, gib(4), ES + ", limit 4 GiB, huge sizes")
    case("es__oom_mix__3g", "oom_mix", ES, gib(3), ES + ", limit 3 GiB")
    case("es__oom_small__256m", "oom_small", ES, 256 * MiB, ES + ", limit 256 MiB")
    case("es__oom_two_stream__2g", "oom_two_stream", ES, gib(2), ES + ", limit 2 GiB, "
         "two streams")
    case("es__oom_xf__6g", "oom_xf", ES, gib(6), ES + ", limit 6 GiB, transformer")

    # expandable segments under a cap the run keeps hitting (OOM, release, retry), alone and
    # with roundup_power2_divisions:2; caps 2..10 GiB
    esrp = ES + ",roundup_power2_divisions:2"
    for conf, tag in [(ES, "es"), (esrp, "esrp2")]:
        for tr, cap in [("es_press_a", 5), ("es_press_a", 6), ("es_xf_dyn", 8),
                        ("es_xf_dyn", 10)]:
            case("%s__%s__%dg" % (tag, tr, cap), tr, conf, gib(cap), "%s, limit %d GiB: %s"
                 % (conf, cap, traces[tr].description))
    case("es__es_press_b__2g", "es_press_b", ES, gib(2), ES + ", limit 2 GiB")
    case("esrp2__es_press_b__3g", "es_press_b", esrp, gib(3), esrp + ", limit 3 GiB")
    case("es__es_press_c__10g", "es_press_c", ES, gib(10), ES + ", limit 10 GiB, huge sizes")
    case("es__es_press_ec__4g", "es_press_ec", ES, gib(4), ES + ", limit 4 GiB, empty_cache "
         "every 125 events")
    case("esrp2__es_press_ec__6g", "es_press_ec", esrp, gib(6), esrp + ", limit 6 GiB, "
         "empty_cache every 125 events")
    case("es__es_press_2s__6g", "es_press_2s", ES, gib(6), ES + ", limit 6 GiB, two streams")
    case("es__es_xf_dyn_ec__8g", "es_xf_dyn_ec", ES, gib(8), ES + ", limit 8 GiB, "
         "transformer, empty_cache every 300 events")
    case("esrp2__es_xf_walk__8g", "es_xf_walk", esrp, gib(8), esrp + ", limit 8 GiB, "
         "transformer, random-walk lengths")
    esgc = ES + ",garbage_collection_threshold:0.8"
    case("esgc08__es_press_a__6g", "es_press_a", esgc, gib(6), esgc + ", limit 6 GiB")
    esms = ES + ",max_split_size_mb:64"
    case("esms64__es_press_b__3g", "es_press_b", esms, gib(3), esms + ", limit 3 GiB")

    # combinations
    combo1 = "max_split_size_mb:128,roundup_power2_divisions:4,garbage_collection_threshold:0.6"
    case("combo1__oom_mix__3g", "oom_mix", combo1, gib(3), combo1 + ", limit 3 GiB")
    case("combo1__xf_walk__4g", "xf_walk", combo1, gib(4), combo1 + ", limit 4 GiB")
    combo2 = ES + ",max_split_size_mb:128"
    case("combo2__mix_all_b", "mix_all_b", combo2, None, combo2)
    case("combo2__oom_two_stream__2g", "oom_two_stream", combo2, gib(2), combo2 +
         ", limit 2 GiB")
    combo3 = ES + "," + RP_LIST + ",garbage_collection_threshold:0.6"
    case("combo3__mix_medium__2g", "mix_medium", combo3, gib(2), combo3 + ", limit 2 GiB")
    case("combo3__oom_frag_small__96m", "oom_frag_small", combo3, 96 * MiB, combo3 +
         ", limit 96 MiB")
    return C


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="directory to write the traces and cases.json into")
    ap.add_argument("--list", action="store_true", help="print per-trace and per-case counts")
    args = ap.parse_args(argv)

    traces = build_traces()
    cases = build_cases(traces)
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"

    # Safety for cases without a limit: PyTorch only OOMs there when the device itself is
    # full, which would make the run depend on the machine. Keep the live set far from the
    # H200's 139 GiB (reserved stays within a small factor of the live bytes).
    for c in cases:
        t = traces[c["trace"][:-4]]
        if c["limit_bytes"] is None and t.peak_live_bytes > 24 * GiB:
            raise SystemExit("case %s: no limit but trace %s peaks at %.1f GiB live"
                             % (c["name"], t.name, t.peak_live_bytes / GiB))

    os.makedirs(args.out, exist_ok=True)
    for t in traces.values():
        t.write(os.path.join(args.out, t.name + ".csv"))
    used = sorted(set(c["trace"] for c in cases))
    unused = sorted(set(t + ".csv" for t in traces) - set(used))
    if unused:
        raise SystemExit("traces not used by any case: %s" % unused)

    case_events = sum(len(traces[c["trace"][:-4]]) for c in cases)
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "generator": "scripts/gen_reference_traces.py",
        "trace_format": "action,id,bytes,stream; free rows repeat the allocating stream; "
                        "a free of an id whose alloc failed (OOM) is skipped",
        "traces": {t.name + ".csv": dict(t.stats(), description=t.description)
                   for t in traces.values()},
        "total_trace_events": sum(len(t) for t in traces.values()),
        "total_case_events": case_events,
        "cases": cases,
    }
    with open(os.path.join(args.out, "cases.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=False)
        f.write("\n")

    if args.list:
        for t in traces.values():
            s = t.stats()
            print("%-20s %5d events  peak live %7.2f GiB  max %8.1f MiB  streams %s"
                  % (t.name, s["events"], s["peak_live_bytes"] / GiB, s["max_bytes"] / MiB,
                     s["streams"]))
        confs = sorted(set(c["alloc_conf"] for c in cases))
        print("%d cases, %d distinct alloc_conf:" % (len(cases), len(confs)))
        for conf in confs:
            print("   %r" % conf)
    print("wrote %d traces (%d events) and %d cases (%d events to replay) to %s"
          % (len(traces), manifest["total_trace_events"], len(cases), case_events, args.out),
          file=sys.stderr)


if __name__ == "__main__":
    main()
