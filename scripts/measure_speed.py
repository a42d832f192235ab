#!/usr/bin/env python3
"""Measures the harness's own speed on this machine: the figures of the README's "Speed of the
harness itself", each with its command.

    scripts/measure_speed.py [--build build] [--runs 15] [--lone-runs 5] [--out FILE.md]

Measure the build users install: scripts/install.sh (or GMB_PGO=1 scripts/build.sh) compiles the
replay loops profile-guided; the table's first line says which build it timed.

Runs, each `--runs` times (medians, quartiles and ranges reported, with the load average):
  - a 10 M-event native CSV (scripts/gen_trace.py 10000000, made under /tmp once) replayed
    through `caching` on sim: on one core (taskset -c 1: parse and simulation share it) and with
    every core (the trace is parsed on a second thread while the first simulates);
  - its peak RSS, against a 1-event replay's (memory does not grow with the trace);
  - recorded PyTorch snapshots replayed end to end, the command a user runs:
    tests/data/torch_snapshots/snap_default.pickle.gz (94,588 trace entries, 63,111 allocs and
    frees) on one core, and snap_speed_120steps.pickle.gz (the same loop for 120 steps: 452,603
    entries, 301,783 allocs and frees) on one core and with every core (the self-check reads the
    run's own device calls), and the same with frames in every entry
    (scripts/make_frames_snapshot.py, made under /tmp once) with every core, and in PyTorch's own
    layout (--shared-dicts: each distinct frame written once, then fetched) on one core and with
    every core;
  - lone runs (--lone-runs, each after 5 s idle) of the 120 steps in PyTorch's layout with
    stacks, on one core and with every core: a run straight after another finds the memory that
    one freed still backed, which a virtual machine with free page reporting takes back from the
    process's next first touch within seconds (docs/PERFORMANCE_LOG.md, session 22), so a user's
    single run costs more there than the back-to-back medians;
  - configs/dynamic_seq.yaml on sim (7 cases, 4.45 M allocator events);
  - the Google Benchmark rows for the same paths (bench/), on one core (the gzip inflate among
    them), and the 120-step snapshot in process with every core (without and with stacks).
Wall time and CPU time (user + sys of all threads) come from os.wait4, so they are exact to the
microsecond; this machine is shared, so the spread is reported, not only a median.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, env=None):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if status != 0:
        sys.exit(f"measure_speed: {' '.join(cmd)} failed (status {status}): {err[-2000:]}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def spread(values, unit="s", digits=3):
    v = sorted(values)
    q1, q3 = v[len(v) // 4], v[(3 * len(v)) // 4]
    return f"{statistics.median(v):.{digits}f} {unit} (quartiles {q1:.{digits}f}-{q3:.{digits}f}, range {v[0]:.{digits}f}-{v[-1]:.{digits}f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--lone-runs", type=int, default=5, help="runs after 5 s idle each (0: none)")
    ap.add_argument("--out", help="also write the table here")
    a = ap.parse_args()
    gmb = os.path.join(a.build, "gpumembench")
    bench = os.path.join(a.build, "gpumembench_bench")
    trace = "/tmp/gmb_speed_t10m.csv"
    if not os.path.exists(trace):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_trace.py"), "10000000", trace], check=True)
    tiny = "/tmp/gmb_speed_tiny.csv"
    with open(tiny, "w") as f:
        f.write("action,id,bytes,stream\nalloc,0,1285,0\n")
    snap = os.path.join(ROOT, "tests", "data", "torch_snapshots", "snap_default.pickle.gz")
    snap_long = os.path.join(ROOT, "tests", "data", "torch_snapshots", "snap_speed_120steps.pickle.gz")
    snap_frames = "/tmp/gmb_speed_frames.pickle.gz"
    snap_shared = "/tmp/gmb_speed_frames_shared.pickle.gz"
    for path, how in ((snap_frames, []), (snap_shared, ["--shared-dicts"])):
        if not os.path.exists(path):
            subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_frames_snapshot.py"), snap_long, path] + how,
                           check=True)
    csv = [gmb, "replay", "--device", "sim", "-q", "--trace", trace, "--allocator", "caching", "--capacity", "80GiB"]
    one = ["taskset", "-c", "1"]
    rows = []
    load = [os.getloadavg()[0]]

    res = {"one": [], "all": [], "snap": [], "long1": [], "long": [], "frames": [], "shared1": [], "shared": [],
           "dyn": []}
    for i in range(a.runs):  # interleaved, so that a busy minute falls on every measure alike
        res["one"].append(run(one + csv))
        res["all"].append(run(csv))
        res["snap"].append(run(one + [gmb, "replay", "--device", "sim", "-q", "--trace", snap, "--allocator", "caching"]))
        long_cmd = [gmb, "replay", "--device", "sim", "-q", "--trace", snap_long, "--allocator", "caching"]
        res["long1"].append(run(one + long_cmd))
        res["long"].append(run(long_cmd))
        res["frames"].append(run([gmb, "replay", "--device", "sim", "-q", "--trace", snap_frames, "--allocator", "caching"]))
        shared_cmd = [gmb, "replay", "--device", "sim", "-q", "--trace", snap_shared, "--allocator", "caching"]
        res["shared1"].append(run(one + shared_cmd))
        res["shared"].append(run(shared_cmd))
        load.append(os.getloadavg()[0])
    res["lone1"], res["lone"] = [], []
    for i in range(a.lone_runs):
        for key, pin in (("lone1", one), ("lone", [])):
            time.sleep(5)
            res[key].append(run(pin + [gmb, "replay", "--device", "sim", "-q", "--trace", snap_shared, "--allocator", "caching"]))
    for i in range(max(3, a.runs // 3)):
        res["dyn"].append(run([gmb, "--config", os.path.join(ROOT, "configs", "dynamic_seq.yaml"), "--device", "sim", "-q"]))
    tiny_rss = run(one + [gmb, "replay", "--device", "sim", "-q", "--trace", tiny, "--allocator", "caching",
                          "--capacity", "80GiB"])[2]

    ev = 10_000_000
    w1 = [w for w, _, _ in res["one"]]
    c1 = [c for _, c, _ in res["one"]]
    wa = [w for w, _, _ in res["all"]]
    ca = [c for _, c, _ in res["all"]]
    rows.append(("10 M-event native CSV through `caching` on sim, one core (`taskset -c 1`): wall",
                 "`taskset -c 1 gpumembench replay --device sim -q --trace t.csv --allocator caching --capacity 80GiB`",
                 f"{spread(w1)}: {ev / statistics.median(w1) / 1e6:.1f} M events/s"))
    rows.append(("the same, CPU (user + sys)", "same", f"{spread(c1)}"))
    rows.append(("the same with every core (the trace parsed on a second thread): wall",
                 "`gpumembench replay --device sim -q --trace t.csv ...`",
                 f"{spread(wa)}: {ev / statistics.median(wa) / 1e6:.1f} M events/s; CPU {spread(ca)}"))
    rss = sorted(r for _, _, r in res["one"])
    rows.append(("peak RSS of the 10 M-event replay, above a 1-event replay's",
                 "same (`ru_maxrss`)", f"{rss[len(rss) // 2] / 1024:.1f} MB, {(rss[len(rss) // 2] - tiny_rss) / 1024:+.1f} MB"))
    ws = [w for w, _, _ in res["snap"]]
    cs = [c for _, c, _ in res["snap"]]
    rows.append(("recorded PyTorch snapshot (94,588 entries, 63,111 allocs and frees), end to end on one core: wall",
                 "`taskset -c 1 gpumembench replay --device sim -q --trace tests/data/torch_snapshots/snap_default.pickle.gz --allocator caching`",
                 f"{spread([x * 1000 for x in ws], 'ms', 1)}: {94588 / statistics.median(ws) / 1e6:.2f} M entries/s, "
                 f"{63111 / statistics.median(ws) / 1e6:.2f} M events/s; CPU {spread([x * 1000 for x in cs], 'ms', 1)}"))
    for key, how in (("long1", "on one core"), ("long", "with every core")):
        ws = [w for w, _, _ in res[key]]
        cs = [c for _, c, _ in res[key]]
        rows.append((f"recorded PyTorch snapshot, 120 steps (452,603 entries, 301,783 allocs and frees), end to end {how}: wall",
                     f"`{'taskset -c 1 ' if key == 'long1' else ''}gpumembench replay --device sim -q --trace "
                     "tests/data/torch_snapshots/snap_speed_120steps.pickle.gz --allocator caching`",
                     f"{spread([x * 1000 for x in ws], 'ms', 1)}: {452603 / statistics.median(ws) / 1e6:.2f} M entries/s, "
                     f"{301783 / statistics.median(ws) / 1e6:.2f} M events/s; CPU {spread([x * 1000 for x in cs], 'ms', 1)}"))
    wf = [w for w, _, _ in res["frames"]]
    cf = [c for _, c, _ in res["frames"]]
    rf = sorted(r for _, _, r in res["frames"])
    rows.append(("the same 120 steps with frames (6-14 per entry, as PyTorch records by default; a 186 MB pickle: "
                 "scripts/make_frames_snapshot.py), with every core: wall",
                 "`gpumembench replay --device sim -q --trace frames.pickle.gz --allocator caching`",
                 f"{spread([x * 1000 for x in wf], 'ms', 1)}: {452603 / statistics.median(wf) / 1e6:.2f} M entries/s; "
                 f"CPU {spread([x * 1000 for x in cf], 'ms', 1)}; peak RSS {rf[len(rf) // 2] / 1024:.1f} MB"))
    for key, how in (("shared1", "on one core"), ("shared", "with every core")):
        ws = [w for w, _, _ in res[key]]
        cs = [c for _, c, _ in res[key]]
        rs = sorted(r for _, _, r in res[key])
        rows.append((f"the same 120 steps with frames in PyTorch's own layout (one dict per distinct frame, written once "
                     f"and fetched from the memo after; a 60 MB pickle: make_frames_snapshot.py --shared-dicts), {how}: wall",
                     f"`{'taskset -c 1 ' if key == 'shared1' else ''}gpumembench replay --device sim -q --trace "
                     "frames_shared.pickle.gz --allocator caching`",
                     f"{spread([x * 1000 for x in ws], 'ms', 1)}: {452603 / statistics.median(ws) / 1e6:.2f} M entries/s, "
                     f"{301783 / statistics.median(ws) / 1e6:.2f} M events/s; CPU {spread([x * 1000 for x in cs], 'ms', 1)}; "
                     f"peak RSS {rs[len(rs) // 2] / 1024:.1f} MB"))
    for key, how in (("lone1", "on one core"), ("lone", "with every core")):
        if not res[key]:
            continue
        ws = [w for w, _, _ in res[key]]
        rows.append((f"the same in PyTorch's own layout, {how}, lone runs (each after 5 s idle; {len(ws)} runs): wall",
                     "same",
                     f"{spread([x * 1000 for x in ws], 'ms', 1)}: {452603 / statistics.median(ws) / 1e6:.2f} M entries/s"))
    cd = [c for _, c, _ in res["dyn"]]
    wd = [w for w, _, _ in res["dyn"]]
    rows.append(("configs/dynamic_seq.yaml on sim (7 cases, 4.45 M allocator events): CPU",
                 "`gpumembench --config configs/dynamic_seq.yaml --device sim -q`",
                 f"{spread(cd)}; wall {spread(wd)}"))
    if os.path.exists(bench):
        def bench_rows(cmd, filt, reps, how, shown):
            out = subprocess.run(cmd + [bench, f"--benchmark_filter={filt}", f"--benchmark_repetitions={reps}",
                                        "--benchmark_report_aggregates_only=true"],
                                 capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                if "_median" in line:
                    parts = line.split()
                    rows.append((f"{parts[0]} (Google Benchmark, {how}, median of {reps})", shown, " ".join(parts[1:])))
        bench_rows(one, "BM_NativeCsvRead|BM_TraceReplayCaching/|BM_SnapshotReplayCaching|BM_SnapshotConvert|BM_Gzip", 3, "one core",
                   "`taskset -c 1 gpumembench_bench --benchmark_filter=... --benchmark_repetitions=3`")
        # The 120-step snapshot in process with every core: the pickle inflated on a second core
        # as it is parsed (workloads/content_feed.h).
        bench_rows([], "BM_SnapshotReplayCaching120Steps", 5, "every core",
                   "`gpumembench_bench --benchmark_filter=BM_SnapshotReplayCaching120Steps --benchmark_repetitions=5`")
    load.append(os.getloadavg()[0])
    version = subprocess.run([gmb, "--version"], capture_output=True, text=True, check=True).stdout
    loops = next((l.split(": ", 1)[1].split(" (")[0] for l in version.splitlines() if l.startswith("replay loops: ")), "unknown")
    commit = next((l.split(": ", 1)[1] for l in version.splitlines() if l.startswith("commit: ")), "unknown")
    pages = next((l.split(": ", 1)[1].split(" (")[0] for l in version.splitlines() if l.startswith("large buffers: ")), "unknown")
    head = (f"Measured by `scripts/measure_speed.py --runs {a.runs}` at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
            f"{os.cpu_count()} cores, load average {min(load):.1f}-{max(load):.1f} during the runs; "
            f"build {commit}, replay loops {loops}, large buffers in {pages} (`gpumembench --version`).\n\n")
    table = "| what | command | measured |\n|---|---|---|\n" + "".join(f"| {w} | {c} | {m} |\n" for w, c, m in rows)
    print(head + table)
    if a.out:
        with open(a.out, "w") as f:
            f.write(head + table)


if __name__ == "__main__":
    main()
