#!/usr/bin/env python3
"""Time PyTorch's own C++ caching allocator (c10::cuda::CUDACachingAllocator::raw_alloc /
raw_delete) on the patterns of bench/bench_caching.cpp, without Python in the timed loops.

    python3 scripts/bench_torch_allocator.py [--out FILE] [--ours BENCH.json] [--cpu N]

Runs on the GPU machine (torch with CUDA; torch.utils.cpp_extension.load_inline builds a small
extension, about a minute the first time). One child process per PYTORCH_CUDA_ALLOC_CONF
setting ("" = native, "expandable_segments:True"), because the variable must be set before
torch initializes its allocator. Patterns, per setting:

  warm_pair/<bytes>   one size (512 B, 1 MiB, 100 MiB) allocated and freed again and again,
                      after one warm-up pair (the block is cached): ns per raw_alloc+raw_delete
  mixed               a live set of 1000 small and 200 large blocks; each step frees one block
                      and allocates a new size of the same class in its place (the generator is
                      compiled verbatim from bench/bench_caching.cpp; its checksum is printed
                      and must equal the Google Benchmark counter pattern_checksum); after one
                      untimed pass over the 65536 steps, ns per step (= one free + one alloc)

Each figure is the median of --reps repetitions of --iters pairs (steady_clock around the loop).
memory_stats before and after each timed section give the device allocations made inside it
(0 means every timed pair was served from the cache).

--ours BENCH.json: gpumembench_bench --benchmark_format=json output (for example
  gpumembench_bench --benchmark_filter=Caching --benchmark_repetitions=5
  --benchmark_format=json > ours.json); the report then also gives our figures and the ratio
  torch / ours per pattern. Prints JSON to stdout (and to --out).
"""

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BENCH_SRC = os.path.join(REPO, "bench", "bench_caching.cpp")
CONFIGS = [("native", ""), ("expandable_segments:True", "expandable_segments:True")]
SIZES = [512, 1 << 20, 100 << 20]


def pattern_source():
    with open(BENCH_SRC) as f:
        text = f.read()
    m = re.search(r"// ---- BEGIN mixed pattern[^\n]*\n(.*?)// ---- END mixed pattern", text, re.S)
    if not m:
        raise SystemExit("cannot find the mixed pattern block in %s" % BENCH_SRC)
    return m.group(1)


EXT_TEMPLATE = r"""
#include <c10/cuda/CUDACachingAllocator.h>
#include <chrono>
#include <cstdint>
#include <vector>

namespace pat {
%(pattern)s
}  // namespace pat

namespace CA = c10::cuda::CUDACachingAllocator;

static double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One pair to put a block of this size in the cache.
void warm_up(int64_t bytes) { CA::raw_delete(CA::raw_alloc(static_cast<size_t>(bytes))); }

// ns per raw_alloc + raw_delete pair, one entry per repetition.
std::vector<double> warm_pair(int64_t bytes, int64_t iters, int64_t reps) {
  std::vector<double> out;
  for (int64_t r = 0; r < reps; ++r) {
    double t0 = now_ns();
    for (int64_t i = 0; i < iters; ++i) {
      void* p = CA::raw_alloc(static_cast<size_t>(bytes));
      CA::raw_delete(p);
    }
    out.push_back((now_ns() - t0) / static_cast<double>(iters));
  }
  return out;
}

static pat::MixedPattern& pattern() {
  static pat::MixedPattern p = pat::make_mixed_pattern();
  return p;
}
static std::vector<void*>& live() {
  static std::vector<void*> v;
  return v;
}

int64_t mixed_checksum() { return static_cast<int64_t>(pat::pattern_checksum(pattern())); }

// Allocates the initial live set and runs one untimed pass over the steps.
void mixed_setup() {
  auto& p = pattern();
  auto& l = live();
  l.assign(p.initial.size(), nullptr);
  for (size_t i = 0; i < l.size(); ++i) l[i] = CA::raw_alloc(p.initial[i]);
  for (const auto& op : p.ops) {
    CA::raw_delete(l[op.slot]);
    l[op.slot] = CA::raw_alloc(op.bytes);
  }
}

// ns per step (one raw_delete + one raw_alloc), one entry per repetition.
std::vector<double> mixed_run(int64_t iters, int64_t reps) {
  auto& p = pattern();
  auto& l = live();
  const size_t n = p.ops.size();
  size_t i = 0;
  std::vector<double> out;
  for (int64_t r = 0; r < reps; ++r) {
    double t0 = now_ns();
    for (int64_t k = 0; k < iters; ++k) {
      const auto& op = p.ops[i];
      CA::raw_delete(l[op.slot]);
      l[op.slot] = CA::raw_alloc(op.bytes);
      if (++i == n) i = 0;
    }
    out.push_back((now_ns() - t0) / static_cast<double>(iters));
  }
  return out;
}

void mixed_teardown() {
  for (void* q : live()) CA::raw_delete(q);
  live().clear();
}
"""

FUNCTIONS = ["warm_up", "warm_pair", "mixed_checksum", "mixed_setup", "mixed_run", "mixed_teardown"]


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def worker(args):
    import torch  # the allocator configuration was set in the environment before this
    from torch.utils.cpp_extension import load_inline

    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    torch.cuda.init()
    torch.cuda.set_device(0)
    t0 = time.time()
    ext = load_inline(name="gmb_torch_alloc_bench", cpp_sources=[EXT_TEMPLATE % {"pattern": pattern_source()}],
                      functions=FUNCTIONS, with_cuda=True, extra_cflags=["-O2"],
                      build_directory=args.build_dir, verbose=False)
    build_s = time.time() - t0

    def stats():
        d = torch.cuda.memory_stats(0)
        return {k: d.get(k, -1) for k in ("num_device_alloc", "num_alloc_retries", "num_ooms",
                                            "reserved_bytes.all.current")}

    res = {"alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           "torch_version": torch.__version__, "build_s": round(build_s, 1),
           "iters": args.iters, "reps": args.reps, "warm_pair": {}, "mixed": {}}
    for size in SIZES:
        ext.warm_up(size)
        before = stats()
        reps = ext.warm_pair(size, args.iters, args.reps)
        after = stats()
        res["warm_pair"][str(size)] = {
            "ns_per_pair_median": round(median(reps), 2), "ns_per_pair_reps": [round(x, 2) for x in reps],
            "device_allocs_in_timed_loops": after["num_device_alloc"] - before["num_device_alloc"]}
        torch.cuda.empty_cache()
    res["mixed"]["pattern_checksum"] = ext.mixed_checksum()
    ext.mixed_setup()
    before = stats()
    reps = ext.mixed_run(args.iters, args.reps)
    after = stats()
    res["mixed"].update({
        "ns_per_step_median": round(median(reps), 2), "ns_per_step_reps": [round(x, 2) for x in reps],
        "device_allocs_in_timed_loops": after["num_device_alloc"] - before["num_device_alloc"],
        "alloc_retries_in_timed_loops": after["num_alloc_retries"] - before["num_alloc_retries"],
        "reserved_GiB": round(after["reserved_bytes.all.current"] / 2**30, 3)})
    ext.mixed_teardown()
    torch.cuda.empty_cache()
    print(json.dumps(res))
    return 0


def load_ours(path):
    """Our figures from Google Benchmark JSON: {(config, pattern): ns}."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name") or b["name"]
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        unit = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
        ns = b["real_time"] * unit
        m = re.match(r"BM_CachingWarmPair/bytes:(\d+)/expandable:(\d)", name)
        if m:
            key = (CONFIGS[int(m.group(2))][0], "warm_pair/" + m.group(1))
        else:
            m = re.match(r"BM_CachingMixed/expandable:(\d)", name)
            if not m:
                continue
            key = (CONFIGS[int(m.group(1))][0], "mixed")
        # a median aggregate wins over single runs
        if b.get("run_type") == "aggregate" or key not in out:
            out[key] = {"ns": ns, "checksum": b.get("pattern_checksum")}
    return out, data.get("context", {})


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="also write the JSON report here")
    ap.add_argument("--ours", help="gpumembench_bench --benchmark_format=json output to compare")
    ap.add_argument("--iters", type=int, default=200000, help="pairs per repetition")
    ap.add_argument("--reps", type=int, default=7, help="repetitions (the median is reported)")
    ap.add_argument("--cpu", type=int, default=None, help="pin the timing process to this CPU")
    ap.add_argument("--build-dir", default=None, help="extension build directory (reused)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    build_dir = args.build_dir or os.path.join(tempfile.gettempdir(), "gmb_torch_alloc_bench")
    os.makedirs(build_dir, exist_ok=True)
    report = {"script": "scripts/bench_torch_allocator.py", "command": " ".join(sys.argv),
              "host_cpu": cpu_model(), "started_unix": int(time.time()), "configs": {}}
    for label, conf in CONFIGS:
        env = dict(os.environ)
        for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
            env.pop(k, None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--iters", str(args.iters),
               "--reps", str(args.reps), "--build-dir", build_dir]
        if args.cpu is not None:
            cmd += ["--cpu", str(args.cpu)]
        print("== %s" % label, file=sys.stderr, flush=True)
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write(p.stdout + p.stderr)
            report["configs"][label] = {"error": "worker exited with %d" % p.returncode,
                                        "stderr_tail": p.stderr[-4000:]}
            continue
        report["configs"][label] = json.loads(p.stdout.strip().splitlines()[-1])
        report.setdefault("torch_version", report["configs"][label].get("torch_version"))

    if args.ours:
        ours, ctx = load_ours(args.ours)
        report["ours_context"] = {k: ctx.get(k) for k in ("host_name", "num_cpus", "mhz_per_cpu",
                                                           "library_build_type", "date")}
        comp = []
        for label, _ in CONFIGS:
            t = report["configs"].get(label, {})
            rows = [("warm_pair/%d" % s, t.get("warm_pair", {}).get(str(s), {}).get("ns_per_pair_median"))
                    for s in SIZES]
            rows.append(("mixed", t.get("mixed", {}).get("ns_per_step_median")))
            for pat_name, torch_ns in rows:
                o = ours.get((label, pat_name))
                entry = {"config": label, "pattern": pat_name, "torch_ns": torch_ns,
                         "ours_ns": round(o["ns"], 2) if o else None}
                if o and torch_ns:
                    entry["speedup"] = round(torch_ns / o["ns"], 2)
                if pat_name == "mixed" and o:
                    entry["checksums_agree"] = (o.get("checksum") is not None and
                                                int(o["checksum"]) == t.get("mixed", {}).get("pattern_checksum"))
                comp.append(entry)
        report["comparison"] = comp
        speedups = [c["speedup"] for c in comp if "speedup" in c]
        if speedups:
            report["min_speedup"] = min(speedups)

    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0 if all("error" not in c for c in report["configs"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
