#!/usr/bin/env python3
"""Record real PyTorch training loops: memory snapshots and per-step allocator statistics.

    python3 scripts/record_torch_training.py --out DIR [--only NAME,...] [--jobs N] [--dry-run]

Ground truth for two things: (1) replaying a user's PyTorch memory snapshot through the
`caching` allocator (gpumembench replay --trace run.pickle.gz) must give what PyTorch recorded,
and (2) the synthetic `transformer` workload (style: pytorch_eager) must allocate what these
models allocate. The model code below is exactly what ran; every run is one child process
(PYTORCH_CUDA_ALLOC_CONF must be set before torch is imported), one at a time by default
(--jobs N: N at once on one GPU, only for runs far below the card's size).

Per run NAME, in --out:
  NAME.pickle.gz   torch.cuda.memory._snapshot() of the whole loop (pickled; protocol per run)
  NAME.json        the run's spec, per-step sequence lengths, per-step cumulative counters
                   (allocations, peak allocated/reserved, device allocs/frees, OOMs),
                   OOM steps, the final torch.cuda.memory_stats(), the device's total memory
                   and the applied memory limit, torch/GPU versions
  manifest.json    every run's name and status
The parent process does not import torch (--dry-run prints the plan anywhere).
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import time

# ---------------------------------------------------------------------------------------
# The runs. Lengths: {"fixed": s} | {"uniform": [lo, hi]} | {"lognormal": [lo, hi, median]},
# drawn per step with random.Random(seed); each batch is padded to its own length (dynamic
# lengths) as a bucketing data loader does.

GPT_1024 = dict(family="gpt", layers=12, hidden=1024, heads=16, vocab=32000, batch=8,
                precision="autocast_bf16", attention="explicit", dropout=0.0)

CALIBRATION = [
    # name, model, lengths, steps
    ("gpt_h1024_fixed1024", dict(GPT_1024), {"fixed": 1024}, 12),
    ("gpt_h1024_uniform", dict(GPT_1024), {"uniform": [128, 1024]}, 30),
    ("gpt2_small_flash", dict(family="gpt", layers=12, hidden=768, heads=12, vocab=50257,
                              batch=8, precision="autocast_bf16", attention="sdpa_flash",
                              dropout=0.0), {"uniform": [128, 1024]}, 30),
    ("llama_bf16_flash", dict(family="llama", layers=8, hidden=2048, heads=16, kv_heads=4,
                              ffn=5632, vocab=32000, batch=4, precision="bf16",
                              attention="sdpa_flash", dropout=0.0),
     {"lognormal": [256, 2048, 768]}, 30),
    ("bert_large_fixed512", dict(family="bert", layers=24, hidden=1024, heads=16, vocab=30522,
                                 batch=16, precision="autocast_bf16", attention="explicit",
                                 dropout=0.1), {"fixed": 512}, 12),
    ("gpt_small_fp32", dict(family="gpt", layers=4, hidden=512, heads=8, vocab=32000,
                            batch=16, precision="fp32", attention="explicit", dropout=0.0),
     {"uniform": [64, 512]}, 30),
    ("gpt_h2048_b1_memeff", dict(family="gpt", layers=24, hidden=2048, heads=16, vocab=32000,
                                 batch=1, precision="autocast_bf16",
                                 attention="sdpa_mem_efficient", dropout=0.0),
     {"uniform": [256, 2048]}, 20),
]

RUNS = []
for name, model, lengths, steps in CALIBRATION:
    for conf_name, conf in (("default", ""), ("expandable", "expandable_segments:True")):
        RUNS.append(dict(name=f"{name}.{conf_name}", model=model, lengths=lengths, steps=steps,
                         alloc_conf=conf, seed=1, group="calibration"))

# Snapshot what-if proof: one GPT-like loop with dynamic lengths under PyTorch's settings.
SNAP_MODEL = dict(GPT_1024)
SNAP_LEN = {"uniform": [128, 1024]}
for conf_name, conf, fraction_gib in (
        ("default", "", None),
        ("expandable", "expandable_segments:True", None),
        ("max_split128", "max_split_size_mb:128", None),
        ("max_split128_expandable", "max_split_size_mb:128,expandable_segments:True", None),
        ("roundup4", "roundup_power2_divisions:4", None),
        ("gc06_cap22g", "garbage_collection_threshold:0.6", 22),
        ("oom_cap16g", "", 16),
        ("oom_cap16g_expandable", "expandable_segments:True", 16)):
    RUNS.append(dict(name=f"snap_{conf_name}", model=SNAP_MODEL, lengths=SNAP_LEN, steps=25,
                     alloc_conf=conf, seed=7, cap_gib=fraction_gib, group="snapshot",
                     record_from_start=True))
# Two streams: gradients cloned on a side stream, record_stream on the main stream's tensors.
RUNS.append(dict(name="snap_two_streams", model=dict(GPT_1024, layers=4), lengths=SNAP_LEN,
                 steps=10, alloc_conf="", seed=7, two_streams=True, group="snapshot",
                 record_from_start=True))
# Frees that wait on another stream at the run's peak: after each backward a side stream, kept
# busy by a sleep kernel, reads every gradient (record_stream), and zero_grad frees them while it
# still runs. PyTorch stops counting a gradient in allocated_bytes at the free (free_requested);
# its block returns only when the side stream is done (free_completed), after the next step's
# peak, so the allocated peak and the reserved peak part here.
RUNS.append(dict(name="snap_stream_wait", model=dict(GPT_1024, layers=4), lengths=SNAP_LEN,
                 steps=8, alloc_conf="", seed=7, stream_wait=True, frames=True, group="snapshot",
                 record_from_start=True, env={"CUDA_DEVICE_MAX_CONNECTIONS": "32"}))
# The same loop under a memory fraction: the next step's allocations find the limit while the
# gradients still wait on the side stream, so PyTorch's retry (release_cached_blocks) waits for
# their events and takes their blocks back inside the allocation that needed them. The trace
# records those free_completed entries with no mark of the retry; the 8.25 GiB run also OOMs.
for cap in (9, 8.25):
    RUNS.append(dict(name=f"snap_stream_retry{str(cap).replace('.', '_')}g", model=dict(GPT_1024, layers=4),
                     lengths=SNAP_LEN, steps=8, alloc_conf="", seed=7, stream_wait=True, cap_gib=cap,
                     group="snapshot", record_from_start=True, env={"CUDA_DEVICE_MAX_CONNECTIONS": "32"}))
# The what-if of snap_stream_retry8_25g checked in PyTorch: the same run under the same fraction
# with the settings a replay of that recording says would (or would not) have avoided its OOM
# (results/h200/whatif_stream_retry/).
for conf_name, conf in (("expandable", "expandable_segments:True"), ("max_split128", "max_split_size_mb:128"),
                        ("gc06", "garbage_collection_threshold:0.6"), ("roundup4", "roundup_power2_divisions:4")):
    RUNS.append(dict(name=f"snap_stream_retry8_25g_{conf_name}", model=dict(GPT_1024, layers=4), lengths=SNAP_LEN,
                     steps=8, alloc_conf=conf, seed=7, stream_wait=True, cap_gib=8.25, group="whatif",
                     record_from_start=True, env={"CUDA_DEVICE_MAX_CONNECTIONS": "32"}))
# The OOM frontier of snap_default checked in PyTorch (results/h200/frontier_snapshot/): `gpumembench
# frontier` on configs/whatif_snapshot.yaml says the default settings need 18152 MiB and OOM at
# 18150, and, not monotone, OOM again at 18602-18666 MiB; expandable_segments:True needs 17290 MiB.
for conf_name, conf, mib in (("default", "", 18150), ("default", "", 18152), ("default", "", 18632),
                             ("default", "", 18700), ("expandable", "expandable_segments:True", 17288),
                             ("expandable", "expandable_segments:True", 17290)):
    RUNS.append(dict(name=f"frontier_{conf_name}_{mib}m", model=SNAP_MODEL, lengths=SNAP_LEN, steps=25,
                     alloc_conf=conf, seed=7, cap_mib=mib, group="frontier", record_from_start=True))
# torch.cuda.empty_cache() between steps, as evaluation loops and some trainers call it: the
# trace records its segment_free entries and nothing else of the call. Once with gradients that
# wait on a side stream (empty_cache then waits for them and takes them back first).
RUNS.append(dict(name="snap_empty_cache", model=dict(GPT_1024, layers=4), lengths=SNAP_LEN, steps=10,
                 alloc_conf="", seed=7, empty_cache_every=3, group="snapshot", record_from_start=True))
RUNS.append(dict(name="snap_empty_cache_expandable", model=dict(GPT_1024, layers=4), lengths=SNAP_LEN, steps=10,
                 alloc_conf="expandable_segments:True", seed=7, empty_cache_every=3, group="snapshot",
                 record_from_start=True))
RUNS.append(dict(name="snap_empty_cache_stream_wait", model=dict(GPT_1024, layers=4), lengths=SNAP_LEN, steps=8,
                 alloc_conf="", seed=7, stream_wait=True, empty_cache_every=2, group="snapshot",
                 record_from_start=True, env={"CUDA_DEVICE_MAX_CONNECTIONS": "32"}))
# Frames (python stacks) on a short run, old pickle protocol: a reader test.
RUNS.append(dict(name="snap_late_start", model=SNAP_MODEL, lengths=SNAP_LEN, steps=8,
                 alloc_conf="", seed=7, group="snapshot", record_from_start=False))
# A ring buffer that overflowed: the trace keeps only the last 30,000 entries.
RUNS.append(dict(name="snap_ring_overflow", model=SNAP_MODEL, lengths=SNAP_LEN, steps=12,
                 alloc_conf="", seed=7, group="snapshot", max_entries=30000))
# The speed benchmark's long snapshot (scripts/measure_speed.py): snap_default's loop for 120
# steps, about 450,000 trace entries, so that a replay's fixed costs (process start, the tables)
# are a small part of its time.
RUNS.append(dict(name="snap_speed_120steps", model=SNAP_MODEL, lengths=SNAP_LEN, steps=120,
                 alloc_conf="", seed=7, group="speed", record_from_start=True))
RUNS.append(dict(name="snap_frames_p2", model=dict(GPT_1024, layers=2, hidden=512, heads=8),
                 lengths={"uniform": [64, 256]}, steps=3, alloc_conf="", seed=3,
                 frames=True, protocol=2, group="snapshot", record_from_start=True))


def draw_lengths(spec, steps, seed):
    import math
    import random
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        if "fixed" in spec:
            out.append(int(spec["fixed"]))
        elif "uniform" in spec:
            lo, hi = spec["uniform"]
            out.append(rng.randint(lo, hi))
        else:
            lo, hi, med = spec["lognormal"]
            v = int(round(math.exp(rng.gauss(math.log(med), 0.6))))
            out.append(min(hi, max(lo, v)))
    return out


# ---------------------------------------------------------------------------------------
# The child: one run.

def child(run, out_dir):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    m = run["model"]
    dev = torch.device("cuda")
    torch.manual_seed(run["seed"])
    precision = m["precision"]
    param_dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    autocast = precision == "autocast_bf16"
    h, nh, L, V = m["hidden"], m["heads"], m["layers"], m["vocab"]
    hd = h // nh
    drop = m.get("dropout", 0.0)
    attention = m["attention"]
    lengths = draw_lengths(run["lengths"], run["steps"], run["seed"])
    max_len = max(lengths)

    def attend(q, k, v, causal, pad_mask):
        # q, k, v: [b, heads, s, hd]
        if attention == "explicit":
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / hd ** 0.5)
            if causal:
                s = q.shape[-2]
                mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
            if pad_mask is not None:
                scores = scores + pad_mask
            probs = torch.softmax(scores, dim=-1)
            probs = F.dropout(probs, drop, training=True)
            return torch.matmul(probs, v)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = SDPBackend.FLASH_ATTENTION if attention == "sdpa_flash" else \
            SDPBackend.EFFICIENT_ATTENTION
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=pad_mask, dropout_p=drop,
                                                  is_causal=causal and pad_mask is None)

    class GptBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
            q, k, v = (t.view(b, s, nh, hd).transpose(1, 2) for t in (q, k, v))
            a = attend(q, k, v, True, None).transpose(1, 2).reshape(b, s, h)
            x = x + F.dropout(self.proj(a), drop, training=True)
            y = self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return x + F.dropout(y, drop, training=True)

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, h), nn.Embedding(max_len, h)
            self.blocks = nn.ModuleList(GptBlock() for _ in range(L))
            self.ln_f = nn.LayerNorm(h)

        def forward(self, idx):
            s = idx.shape[1]
            pos = torch.arange(s, device=idx.device)
            x = F.dropout(self.wte(idx) + self.wpe(pos), drop, training=True)
            for blk in self.blocks:
                x = blk(x)
            return F.linear(self.ln_f(x), self.wte.weight)  # tied output layer

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

        def forward(self, x):  # as Llama's reference code: in fp32, cast back
            xf = x.float()
            xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * xf.to(x.dtype)

    def rotate_half(t):
        t1, t2 = t[..., : t.shape[-1] // 2], t[..., t.shape[-1] // 2:]
        return torch.cat((-t2, t1), dim=-1)

    class LlamaBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.kvh = m["kv_heads"]
            self.n1, self.n2 = RMSNorm(h), RMSNorm(h)
            self.wq = nn.Linear(h, h, bias=False)
            self.wk = nn.Linear(h, self.kvh * hd, bias=False)
            self.wv = nn.Linear(h, self.kvh * hd, bias=False)
            self.wo = nn.Linear(h, h, bias=False)
            self.gate = nn.Linear(h, m["ffn"], bias=False)
            self.up = nn.Linear(h, m["ffn"], bias=False)
            self.down = nn.Linear(m["ffn"], h, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            y = self.n1(x)
            q = self.wq(y).view(b, s, nh, hd).transpose(1, 2)
            k = self.wk(y).view(b, s, self.kvh, hd).transpose(1, 2)
            v = self.wv(y).view(b, s, self.kvh, hd).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            rep = nh // self.kvh
            k = k[:, :, None].expand(b, self.kvh, rep, s, hd).reshape(b, nh, s, hd)
            v = v[:, :, None].expand(b, self.kvh, rep, s, hd).reshape(b, nh, s, hd)
            a = attend(q, k, v, True, None).transpose(1, 2).reshape(b, s, h)
            x = x + self.wo(a)
            y = self.n2(x)
            return x + self.down(F.silu(self.gate(y)) * self.up(y))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, h)
            self.blocks = nn.ModuleList(LlamaBlock() for _ in range(L))
            self.norm = RMSNorm(h)
            self.out = nn.Linear(h, V, bias=False)
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
            self.register_buffer("inv_freq", inv, persistent=False)

        def forward(self, idx):
            s = idx.shape[1]
            t = torch.arange(s, device=idx.device, dtype=torch.float32)
            freqs = torch.outer(t, self.inv_freq.float())
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos().to(param_dtype), emb.sin().to(param_dtype)
            x = self.emb(idx)
            for blk in self.blocks:
                x = blk(x, cos, sin)
            return self.out(self.norm(x))

    class BertLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x, pad_mask):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).split(h, dim=-1)
            q, k, v = (t.view(b, s, nh, hd).transpose(1, 2) for t in (q, k, v))
            a = attend(q, k, v, False, pad_mask).transpose(1, 2).reshape(b, s, h)
            x = self.ln1(x + F.dropout(self.proj(a), drop, training=True))  # post-LN
            y = self.fc2(F.gelu(self.fc1(x)))
            return self.ln2(x + F.dropout(y, drop, training=True))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe, self.tte = nn.Embedding(V, h), nn.Embedding(512, h), \
                nn.Embedding(2, h)
            self.ln = nn.LayerNorm(h)
            self.layers = nn.ModuleList(BertLayer() for _ in range(L))
            self.head_fc, self.head_ln = nn.Linear(h, h), nn.LayerNorm(h)
            self.head_bias = nn.Parameter(torch.zeros(V))

        def forward(self, idx):
            b, s = idx.shape
            pos = torch.arange(s, device=idx.device)
            types = torch.zeros_like(idx)
            x = self.ln(self.wte(idx) + self.wpe(pos) + self.tte(types))
            x = F.dropout(x, drop, training=True)
            for layer in self.layers:
                x = layer(x, None)
            x = self.head_ln(F.gelu(self.head_fc(x)))
            return F.linear(x, self.wte.weight, self.head_bias)

    frames = run.get("frames", False)

    def start_recording():
        torch.cuda.memory._record_memory_history(
            enabled="all", context="all" if frames else None, stacks="python",
            max_entries=run.get("max_entries", 4_000_000))

    # Snapshot runs record from before the model exists (every block's alloc is in the
    # trace); calibration runs start after the model is on the GPU (parameters then are
    # blocks alive at the start of the trace).
    if run.get("record_from_start"):
        torch.cuda.init()
        start_recording()
    model = {"gpt": Gpt, "llama": Llama, "bert": Bert}[m["family"]]().to(dev, param_dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    n_params = sum(p.numel() for p in model.parameters())

    total = torch.cuda.get_device_properties(0).total_memory
    limit = None
    if run.get("cap_gib") or run.get("cap_mib"):
        cap = int(run["cap_gib"] * 2**30) if run.get("cap_gib") else run["cap_mib"] * 2**20
        fraction = cap / total
        # PyTorch's limit is size_t(fraction * total): the cap to the byte (a frontier is exact to 2 MiB).
        assert int(fraction * total) == cap, (cap, fraction)
        torch.cuda.set_per_process_memory_fraction(fraction)
        limit = int(fraction * total)
    torch.cuda.synchronize()
    if not run.get("record_from_start"):
        start_recording()
    side = torch.cuda.Stream() if run.get("two_streams") or run.get("stream_wait") else None
    keys = ["allocation.all.allocated", "allocated_bytes.all.peak", "reserved_bytes.all.peak",
            "allocated_bytes.all.current", "reserved_bytes.all.current", "num_device_alloc",
            "num_device_free", "num_ooms", "num_alloc_retries", "requested_bytes.all.peak"]
    per_step, oom_steps = [], []
    gen = torch.Generator(device="cpu").manual_seed(run["seed"])
    gpu_gen = torch.Generator(device=dev).manual_seed(run["seed"]) if run.get("stream_wait") else None
    if run.get("stream_wait"):
        # The loop on a stream of its own: on the legacy default stream its kernels would wait
        # for the side stream's sleep (and the host, its launch queue full, with them).
        main_stream = torch.cuda.Stream()
        main_stream.wait_stream(torch.cuda.current_stream())
        torch.cuda.set_stream(main_stream)
    t0 = time.time()
    for step, s in enumerate(lengths):
        try:
            if run.get("stream_wait"):
                # Drawn on the GPU: a copy from the host waits for the GPU (from pageable
                # memory), and pinning new host memory does too (cudaHostAlloc).
                idx = torch.randint(0, V, (m["batch"], s), generator=gpu_gen, device=dev)
                tgt = torch.randint(0, V, (m["batch"], s), generator=gpu_gen, device=dev)
            else:
                idx = torch.randint(0, V, (m["batch"], s), generator=gen).to(dev)
                tgt = torch.randint(0, V, (m["batch"], s), generator=gen).to(dev)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
                logits = model(idx)
            loss = F.cross_entropy(logits.float().view(-1, V), tgt.view(-1))
            del logits
            loss.backward()
            if run.get("stream_wait"):
                grads = [p.grad for p in model.parameters() if p.grad is not None]
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    torch.cuda._sleep(1_000_000_000)  # about 0.5 s: past the next step's peak
                    for g in grads:  # a use on the side stream (g.norm() waited for the GPU)
                        g.mul_(1.0)
                for g in grads:
                    g.record_stream(side)
                del grads
            elif side is not None:
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    copies = [p.grad.clone() for p in model.parameters() if p.grad is not None][:8]
                for p in list(model.parameters())[:8]:
                    if p.grad is not None:
                        p.grad.record_stream(side)
                torch.cuda.current_stream().wait_stream(side)
                del copies
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss, idx, tgt
            if run.get("empty_cache_every") and step % run["empty_cache_every"] == run["empty_cache_every"] - 1:
                torch.cuda.empty_cache()  # as evaluation loops and some trainers do between steps
        except torch.OutOfMemoryError:
            oom_steps.append(step)
            opt.zero_grad(set_to_none=True)
            loss = logits = idx = tgt = None
        st = torch.cuda.memory_stats()
        per_step.append({k: st.get(k, 0) for k in keys})
    torch.cuda.synchronize()
    seconds = time.time() - t0
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    name = run["name"]
    with gzip.GzipFile(os.path.join(out_dir, name + ".pickle.gz"), "wb", mtime=0) as f:
        import pickle
        pickle.dump(snap, f, protocol=run.get("protocol", pickle.DEFAULT_PROTOCOL))
    traces = snap.get("device_traces", [[]])
    result = dict(
        run=run, lengths=lengths, per_step=per_step, oom_steps=oom_steps,
        memory_stats=torch.cuda.memory_stats(), total_memory=total, memory_limit=limit,
        n_params=n_params, seconds=seconds, trace_events=sum(len(t) for t in traces),
        torch=torch.__version__, cuda=torch.version.cuda,
        gpu=torch.cuda.get_device_name(0), alloc_conf_env=os.environ.get(
            "PYTORCH_CUDA_ALLOC_CONF", ""),
        pickle_protocol=run.get("protocol", __import__("pickle").DEFAULT_PROTOCOL))
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(result, f, indent=1)


# ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--group", default="")
    # Runs share the GPU's memory: concurrent runs can make each other's cudaMalloc fail
    # (a retry, or an OOM that no replay can reproduce). Only runs that never come near the
    # card's size may overlap (--jobs 5 was used for the calibration group, none retried).
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--child", default="")
    a = ap.parse_args()
    if a.child:
        child(json.loads(a.child), a.out)
        return 0
    runs = [r for r in RUNS if (not a.only or r["name"] in a.only.split(","))
            and (not a.group or r["group"] == a.group)]
    if a.dry_run:
        for r in runs:
            print(r["name"], r["alloc_conf"] or "(defaults)", r.get("cap_gib") or "", r["steps"],
                  "steps")
        return 0
    os.makedirs(a.out, exist_ok=True)
    pending = list(runs)
    active = []
    status = {}
    # Runs that cap memory go last: a fraction is per process, but the driver's
    # placement should not be shared with neighbours either.
    pending.sort(key=lambda r: r.get("cap_gib") is not None)
    while pending or active:
        while pending and len(active) < a.jobs:
            r = pending.pop(0)
            env = dict(os.environ)
            for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
                env.pop(v, None)
            if r["alloc_conf"]:
                env["PYTORCH_CUDA_ALLOC_CONF"] = r["alloc_conf"]
            env.update(r.get("env", {}))
            log = open(os.path.join(a.out, r["name"] + ".log"), "w")
            p = subprocess.Popen([sys.executable, __file__, "--out", a.out, "--child",
                                  json.dumps(r)], env=env, stdout=log, stderr=subprocess.STDOUT)
            active.append((r, p, time.time()))
        time.sleep(0.5)
        for item in list(active):
            r, p, t = item
            if p.poll() is not None:
                status[r["name"]] = {"rc": p.returncode, "seconds": round(time.time() - t, 1)}
                print(r["name"], status[r["name"]], flush=True)
                active.remove(item)
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(status, f, indent=1)
    return 0 if all(s["rc"] == 0 for s in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
