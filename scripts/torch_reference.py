#!/usr/bin/env python3
"""Replay the reference traces through real PyTorch and record what its allocator does.

    python3 scripts/torch_reference.py --traces DIR --out DIR

DIR (traces) holds the traces and cases.json written by scripts/gen_reference_traces.py.
For every case of cases.json the trace is replayed with
torch.cuda.caching_allocator_alloc / caching_allocator_delete under the case's
PYTORCH_CUDA_ALLOC_CONF and memory limit, and after every event the allocator's
statistics are recorded. Output (in --out):

  <case>.csv.gz            one row per event:
                           event,action,id,bytes,stream,ptr,allocated_bytes,reserved_bytes,
                           active_bytes,requested_bytes,inactive_split_bytes,segments,
                           num_alloc_retries,num_ooms,num_device_alloc,num_device_free,oom
                           (values after the event; ptr is the returned address in decimal,
                           0 on an OOM and on frees; a free of an id whose alloc failed is
                           skipped by the replay and recorded with unchanged stats; an
                           empty_cache row, id -1, is torch.cuda.empty_cache())
  <case>.segments.json.gz  torch.cuda.memory_snapshot() at the end of the trace, summarized
  manifest.json            torch / GPU / driver, totals, per case: alloc_conf, limits (the
                           requested one and the exact one PyTorch applies), event count,
                           OOM count, final memory_stats, timings

One child process per distinct alloc_conf (the variable must be set before torch is
imported); within a child the cases run one after the other, and between two cases every
block is freed, the cache emptied and the peak and accumulated statistics reset. Cases
without a limit run first in their process, before any memory fraction is set.

The parent process does not import torch: `--dry-run` shows the plan anywhere.
"""

import argparse
import csv
import gzip
import io
import json
import os
import subprocess
import sys
import time

HEADER = ["event", "action", "id", "bytes", "stream", "ptr", "allocated_bytes",
          "reserved_bytes", "active_bytes", "requested_bytes", "inactive_split_bytes",
          "segments", "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free",
          "oom"]

ENV_VARS_TO_CLEAR = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")


# ----------------------------------------------------------------------------------------
# common helpers (no torch)

def load_cases(traces_dir):
    with open(os.path.join(traces_dir, "cases.json")) as f:
        m = json.load(f)
    return m, m["cases"]


def read_trace(path):
    """[(action, id, bytes or None, stream)] from a native trace CSV."""
    rows = []
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r)
        header = [h.strip() for h in header]
        ia, ii, ib = header.index("action"), header.index("id"), header.index("bytes")
        isx = header.index("stream") if "stream" in header else None
        for line in r:
            if not line or not line[0].strip():
                continue
            action = line[ia].strip()
            stream = int(line[isx]) if isx is not None and line[isx].strip() else 0
            if action == "alloc":
                rows.append(("alloc", int(line[ii]), int(line[ib]), stream))
            elif action == "free":
                rows.append(("free", int(line[ii]), None, stream))
            elif action == "empty_cache":
                rows.append(("empty_cache", -1, None, 0))
            else:
                raise ValueError("%s: unknown action %r" % (path, action))
    return rows


def write_gz_bytes(path, data):
    """Deterministic gzip (mtime 0, no file name)."""
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9,
                           mtime=0) as gz:
            gz.write(data)


def plan_groups(cases, isolate=False):
    """Groups of cases sharing one child process: same alloc_conf; cases without a limit
    first (stable), so that no memory fraction was ever set when they run."""
    groups = []
    by_conf = {}
    for c in cases:
        key = c["alloc_conf"] if not isolate else (c["alloc_conf"], c["name"])
        if key not in by_conf:
            by_conf[key] = []
            groups.append((c["alloc_conf"], by_conf[key]))
        by_conf[key].append(c)
    out = []
    for conf, cs in groups:
        cs = [c for c in cs if c["limit_bytes"] is None] + \
             [c for c in cs if c["limit_bytes"] is not None]
        out.append((conf, cs))
    return out


def gpu_info_from_nvidia_smi():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.used",
             "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True, text=True, timeout=30).stdout.strip()
        name, driver, total, used = [x.strip() for x in out.split(",")]
        return {"name": name, "driver_version": driver, "memory_total_mib": int(total),
                "memory_used_mib_at_start": int(used)}
    except Exception as e:  # noqa: BLE001 - informational only
        return {"error": repr(e)}


# ----------------------------------------------------------------------------------------
# the worker (imports torch)

def worker(args):
    conf_env = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    import torch  # noqa: E402 - the environment variable must be set before this

    t_import = time.time()
    manifest, all_cases = load_cases(args.traces)
    wanted = args.cases.split(",")
    cases = [c for name in wanted for c in all_cases if c["name"] == name]
    assert len(cases) == len(wanted), "unknown case in %s" % args.cases

    torch.cuda.init()
    dev = 0
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    total_global_mem = int(props.total_memory)
    free0, total_memgetinfo = (int(x) for x in torch.cuda.mem_get_info(dev))

    # streams: 0 is the current (default) stream; others created once, on first use
    streams = {0: torch.cuda.current_stream(dev)}

    def get_stream(n):
        s = streams.get(n)
        if s is None:
            s = streams[n] = torch.cuda.Stream(device=dev)
        return s

    alloc_fn = torch.cuda.caching_allocator_alloc
    delete_fn = torch.cuda.caching_allocator_delete
    OOM = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError

    # statistics after each event: the nested dict avoids flattening ~400 keys per call
    nested = getattr(torch.cuda, "memory_stats_as_nested_dict", None)

    def stats_nested():
        d = nested(dev)
        return (d["allocated_bytes"]["all"]["current"], d["reserved_bytes"]["all"]["current"],
                d["active_bytes"]["all"]["current"], d["requested_bytes"]["all"]["current"],
                d["inactive_split_bytes"]["all"]["current"], d["segment"]["all"]["current"],
                d.get("num_alloc_retries", -1), d.get("num_ooms", -1),
                d.get("num_device_alloc", -1), d.get("num_device_free", -1))

    def stats_flat():
        d = torch.cuda.memory_stats(dev)
        return (d["allocated_bytes.all.current"], d["reserved_bytes.all.current"],
                d["active_bytes.all.current"], d["requested_bytes.all.current"],
                d["inactive_split_bytes.all.current"], d["segment.all.current"],
                d.get("num_alloc_retries", -1), d.get("num_ooms", -1),
                d.get("num_device_alloc", -1), d.get("num_device_free", -1))

    get_stats = stats_flat
    # make sure the allocator is initialized, then pick the fast path if it agrees
    p = alloc_fn(512, device=dev, stream=streams[0])
    delete_fn(p)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    torch.cuda.reset_accumulated_memory_stats(dev)
    if nested is not None:
        try:
            if stats_nested() == stats_flat():
                get_stats = stats_nested
        except Exception:  # noqa: BLE001
            pass

    proc = {
        "pid": os.getpid(),
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "python": sys.version.split()[0],
        "device_name": props.name,
        "device_capability": "%d.%d" % (props.major, props.minor),
        "total_global_mem": total_global_mem,
        "mem_get_info_total": total_memgetinfo,
        "mem_get_info_free_at_start": free0,
        "PYTORCH_CUDA_ALLOC_CONF": conf_env,
        "allocator_backend": (torch.cuda.get_allocator_backend()
                              if hasattr(torch.cuda, "get_allocator_backend") else None),
        "has_get_per_process_memory_fraction":
            hasattr(torch.cuda, "get_per_process_memory_fraction"),
        "stats_getter": get_stats.__name__,
        "import_and_init_s": round(time.time() - args.t0, 3),
        "cases": {},
    }
    fraction_was_set = False

    for c in cases:
        name = c["name"]
        if args.deadline and time.time() > args.deadline:
            proc["cases"][name] = {"status": "skipped", "reason": "deadline"}
            print("[%s] SKIPPED (deadline)" % name, flush=True)
            continue
        t_case = time.time()
        res = {"status": "running", "alloc_conf": c["alloc_conf"], "trace": c["trace"],
               "limit_bytes": c["limit_bytes"], "process_order": len(proc["cases"])}
        proc["cases"][name] = res
        rows = read_trace(os.path.join(args.traces, c["trace"]))
        for _, _, _, sn in rows:
            get_stream(sn)
        res["stream_handles"] = {str(k): int(v.cuda_stream) for k, v in streams.items()}

        # memory limit
        limit = c["limit_bytes"]
        if limit is None:
            if fraction_was_set:
                torch.cuda.set_per_process_memory_fraction(1.0, dev)
            res.update(fraction=None, limit_effective_bytes=None)
        else:
            fraction = float(limit) / float(total_memgetinfo)
            torch.cuda.set_per_process_memory_fraction(fraction, dev)
            fraction_was_set = True
            # PyTorch: allowed_memory_maximum = static_cast<size_t>(fraction * total) in
            # double; 2.x takes total from cudaMemGetInfo or totalGlobalMem (same on H200).
            eff_mgi = int(fraction * float(total_memgetinfo))
            eff_tgm = int(fraction * float(total_global_mem))
            res.update(fraction=fraction, fraction_repr=repr(fraction),
                       total_bytes=total_memgetinfo,
                       limit_effective_bytes=eff_mgi,
                       limit_effective_bytes_from_total_global_mem=eff_tgm,
                       limit_totals_agree=(eff_mgi == eff_tgm))
            if hasattr(torch.cuda, "get_per_process_memory_fraction"):
                try:
                    res["fraction_reported"] = torch.cuda.get_per_process_memory_fraction(dev)
                except Exception as e:  # noqa: BLE001
                    res["fraction_reported"] = repr(e)
        res["initial_stats"] = dict(zip(HEADER[6:16], get_stats()))
        if args.history:
            # PyTorch's own trace of the run (no stacks): which pages it mapped and unmapped
            torch.cuda.memory._record_memory_history(enabled="all", context=None,
                                                     stacks="python", max_entries=10000000,
                                                     clear_history=True)

        # replay
        ptrs = {}
        out = io.StringIO()
        out.write(",".join(HEADER) + "\n")
        n_oom = n_skipped_free = 0
        t_replay = time.time()
        st = streams
        for ev, (action, i, nbytes, sn) in enumerate(rows):
            oom = 0
            ptr = 0
            if action == "alloc":
                try:
                    ptr = alloc_fn(nbytes, device=dev, stream=st[sn])
                    ptrs[i] = ptr
                except OOM:
                    ptr = 0
                    oom = 1
                    n_oom += 1
                b = str(nbytes)
            elif action == "empty_cache":
                torch.cuda.empty_cache()
                b = ""
            else:
                p = ptrs.pop(i, None)
                if p is None:
                    n_skipped_free += 1
                else:
                    delete_fn(p)
                b = ""
            s = get_stats()
            out.write("%d,%s,%d,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n"
                      % ((ev, action, i, b, sn, ptr) + s + (oom,)))
        t_replay = time.time() - t_replay
        torch.cuda.synchronize(dev)

        # end state: snapshot of the segments, final statistics
        segs = []
        stream_index = {int(v.cuda_stream): k for k, v in streams.items()}
        any_expandable = False
        for seg in torch.cuda.memory_snapshot():
            if seg.get("device", dev) != dev:
                continue
            any_expandable = any_expandable or bool(seg.get("is_expandable", False))
            segs.append({
                "address": int(seg["address"]),
                "total_size": int(seg["total_size"]),
                "stream": int(seg.get("stream", 0)),
                "stream_index": stream_index.get(int(seg.get("stream", 0))),
                "segment_type": seg.get("segment_type"),
                "is_expandable": seg.get("is_expandable"),
                "allocated_size": seg.get("allocated_size"),
                "active_size": seg.get("active_size"),
                "requested_size": seg.get("requested_size"),
                # blocks in address order: [offset, size, requested_size, state]
                "blocks": [[int(b["address"]) - int(seg["address"]), int(b["size"]),
                            int(b.get("requested_size", 0)), b.get("state")]
                           for b in seg.get("blocks", [])],
            })
        segs.sort(key=lambda x: x["address"])
        final_flat = {k: v for k, v in torch.cuda.memory_stats(dev).items()
                      if isinstance(v, (int, float))}

        write_gz_bytes(os.path.join(args.out, name + ".csv.gz"), out.getvalue().encode())
        if args.history:
            entries = []
            try:
                snap = torch.cuda.memory._snapshot()
                for e in snap["device_traces"][dev]:
                    entries.append([e.get("action"), int(e.get("addr", 0)),
                                    int(e.get("size", 0)), stream_index.get(int(e.get("stream", 0)))])
                torch.cuda.memory._record_memory_history(enabled=None)
            except Exception as ex:  # noqa: BLE001 - the replay's figures stand without it
                res["history_error"] = repr(ex)
            write_gz_bytes(os.path.join(args.out, name + ".history.json.gz"),
                           json.dumps({"case": name, "columns": ["action", "addr", "size",
                                                                 "stream_index"],
                                       "entries": entries}).encode())
        write_gz_bytes(os.path.join(args.out, name + ".segments.json.gz"),
                       json.dumps({"case": name, "segments": segs}, indent=0).encode())

        # clean up for the next case in this process
        for p in list(ptrs.values()):
            delete_fn(p)
        n_live_at_end = len(ptrs)
        ptrs.clear()
        torch.cuda.synchronize(dev)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        torch.cuda.reset_accumulated_memory_stats(dev)
        after = get_stats()

        elapsed = time.time() - t_case
        res.update(
            status="ok", events=len(rows), ooms=n_oom, skipped_frees=n_skipped_free,
            live_at_end=n_live_at_end, final=dict(zip(HEADER[6:16], s)),
            final_memory_stats=final_flat, segments_at_end=len(segs),
            any_expandable_segment=any_expandable,
            stats_after_cleanup=dict(zip(HEADER[6:16], after)),
            clean_after=(after[0] == 0 and after[1] == 0),
            # without a limit an OOM or a retry means the device itself was full:
            # machine-dependent, not reproducible
            device_oom_suspect=(limit is None and (n_oom > 0 or s[6] > 0)),
            replay_s=round(t_replay, 3), elapsed_s=round(elapsed, 3),
            us_per_event=round(1e6 * t_replay / max(1, len(rows)), 1))
        print("  %-36s %5d events %4d ooms  peak reserved %9.1f MiB  %6.2f s"
              % (name, len(rows), n_oom,
                 final_flat.get("reserved_bytes.all.peak", 0) / 2**20, elapsed), flush=True)
        with open(args.result_file, "w") as f:  # after every case: survives a crash
            json.dump(proc, f, indent=1)

    proc["elapsed_s"] = round(time.time() - t_import, 3)
    with open(args.result_file, "w") as f:
        json.dump(proc, f, indent=1)
    return 0


# ----------------------------------------------------------------------------------------
# the parent

def main():
    ap = argparse.ArgumentParser(description="replay reference traces through real PyTorch")
    ap.add_argument("--traces", required=True, help="directory with the traces and cases.json")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--only", default=None,
                    help="comma-separated case names (or substrings) to run; default all")
    ap.add_argument("--isolate", action="store_true", help="one process per case")
    ap.add_argument("--budget-s", type=float, default=240.0,
                    help="start no case after this many seconds (default 240); the cases "
                         "left are recorded as skipped")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    ap.add_argument("--history", action="store_true",
                    help="also write <case>.history.json.gz: PyTorch's allocator trace "
                         "(alloc, free, segment map/unmap, oom entries with addresses)")
    # worker mode (internal)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cases", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result-file", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--t0", type=float, default=0.0, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        return worker(args)

    t0 = time.time()
    gen_manifest, cases = load_cases(args.traces)
    if args.only:
        keys = args.only.split(",")
        cases = [c for c in cases if any(k == c["name"] or k in c["name"] for k in keys)]
    groups = plan_groups(cases, args.isolate)
    n_events = 0
    for conf, cs in groups:
        for c in cs:
            n_events += len(read_trace(os.path.join(args.traces, c["trace"])))
    print("%d cases, %d events, %d processes" % (len(cases), n_events, len(groups)), flush=True)
    if args.dry_run:
        for conf, cs in groups:
            print("process PYTORCH_CUDA_ALLOC_CONF=%r" % conf)
            for c in cs:
                print("    %-40s limit %s" % (c["name"], c["limit_bytes"]))
        return 0

    os.makedirs(args.out, exist_ok=True)
    deadline = t0 + args.budget_s
    result = {
        "schema_version": 1,
        "script": "scripts/torch_reference.py",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "started_unix": int(t0),
        "gpu": gpu_info_from_nvidia_smi(),
        "csv_header": HEADER,
        "generator": {k: gen_manifest.get(k) for k in ("schema_version", "generator",
                                                        "total_trace_events",
                                                        "total_case_events")},
        "processes": [],
        "cases": [],
    }
    per_case = {}
    failures = 0
    for gi, (conf, cs) in enumerate(groups):
        env = dict(os.environ)
        for k in ENV_VARS_TO_CLEAR:
            env.pop(k, None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        result_file = os.path.join(args.out, "_worker_%02d.json" % gi)
        if os.path.exists(result_file):
            os.remove(result_file)
        cmd = [sys.executable, os.path.abspath(__file__), "--worker",
               "--traces", args.traces, "--out", args.out,
               "--cases", ",".join(c["name"] for c in cs), "--result-file", result_file,
               "--deadline", repr(deadline), "--t0", repr(time.time())]
        if args.history:
            cmd.append("--history")
        print("== process %d/%d PYTORCH_CUDA_ALLOC_CONF=%r: %d cases"
              % (gi + 1, len(groups), conf, len(cs)), flush=True)
        t_proc = time.time()
        try:
            # a process may finish the case it started after the deadline
            timeout = max(60.0, deadline - time.time() + 90.0)
            rc = subprocess.run(cmd, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        proc = {}
        if os.path.exists(result_file):
            with open(result_file) as f:
                proc = json.load(f)
            os.remove(result_file)
        proc_cases = proc.pop("cases", {})
        proc.update(alloc_conf=conf, returncode=rc, wall_s=round(time.time() - t_proc, 3),
                    case_names=[c["name"] for c in cs])
        result["processes"].append(proc)
        for c in cs:
            r = proc_cases.get(c["name"]) or {"status": "missing"}
            if r.get("status") == "running":
                r["status"] = "crashed"
            if r.get("status") != "ok":
                failures += 1
            r.setdefault("alloc_conf", conf)
            r.setdefault("trace", c["trace"])
            r.setdefault("limit_bytes", c["limit_bytes"])
            r["process"] = gi
            r["description"] = c["description"]
            per_case[c["name"]] = r
        if rc != 0:
            print("!! process for %r exited with %s" % (conf, rc), flush=True)
    for c in cases:
        result["cases"].append(dict(name=c["name"], **per_case[c["name"]]))
    first = next((p for p in result["processes"] if p.get("torch_version")), {})
    for k in ("torch_version", "torch_cuda_version", "device_name", "total_global_mem",
              "mem_get_info_total", "mem_get_info_free_at_start", "python"):
        result[k] = first.get(k)
    result["total_events"] = sum(r.get("events", 0) for r in result["cases"])
    result["total_ooms"] = sum(r.get("ooms", 0) for r in result["cases"])
    result["failed_cases"] = [r["name"] for r in result["cases"] if r.get("status") != "ok"]
    result["device_oom_suspects"] = [r["name"] for r in result["cases"]
                                     if r.get("device_oom_suspect")]
    result["elapsed_s"] = round(time.time() - t0, 3)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print("done: %d cases (%d failed), %d events, %d OOMs, %.1f s -> %s"
          % (len(result["cases"]), failures, result["total_events"], result["total_ooms"],
             result["elapsed_s"], args.out), flush=True)
    if result["device_oom_suspects"]:
        print("!! cases without a limit that hit a device OOM/retry: %s"
              % result["device_oom_suspects"], flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
