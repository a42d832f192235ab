#!/usr/bin/env python3
"""Plots of a gpumembench run, as PNG and PDF.

Usage: python3 scripts/plot.py RESULTS_DIR [--out DIR] [--formats png,pdf]

Reads RESULTS_DIR/results.json (and RESULTS_DIR/timelines/caseNN.csv where the run kept
timelines, `run: {timeline: true}`), and RESULTS_DIR/frontier.json when `gpumembench frontier`
wrote one there. Writes into --out (default RESULTS_DIR/plots):

  memory_over_time     allocated vs reserved bytes per case: per event from the timeline, else
                       each step's peak allocated and peak reserved from results.json's
                       step_series (older results without per-step peaks: the values at the
                       end of each step, said so in the legend); the capacity as a line, OOMs
                       marked, one x-axis for all panels
  fragmentation        fragmentation over the steps: in each step (1 - its peak allocated /
                       its peak reserved; older results: at the step's end) and so far (the
                       tables' figure, 1 - allocated at the peak of reserved / that peak;
                       older results: 1 - peak allocated / peak reserved since the start)
  throughput_vs_memory steps/s (tokens/s where measured) against peak reserved, one point per
                       case, bars from the min-max over repeats; hollow points are modeled;
                       cases with an OOM are red crosses (their rate is that of the steps they
                       ran), a case with no rate sits on the axis, none is left out
  oom_frontier         the frontier per allocator (only with frontier.json)

Needs matplotlib only. Exit status: 0 when the plots were written, 2 for bad input.
"""

import argparse
import csv
import json
import math
import os
import sys

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    plt.rcParams["svg.fonttype"] = "none"  # SVG text stays text: searchable, editable
    from matplotlib.ticker import MaxNLocator
except ImportError:  # pragma: no cover - told to the user, not tested
    sys.stderr.write("plot.py: matplotlib is missing (Debian: apt-get install python3-matplotlib; "
                     "pip: pip install matplotlib)\n")
    sys.exit(2)

MiB = 1 << 20
GiB = 1 << 30
# Long timelines are thinned to about this many points per case (OOM events always kept).
MAX_POINTS = 20000


class InputError(Exception):
    pass


def load_json(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot open ({e.strerror})")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON (line {e.lineno}, column {e.colno}); expected a gpumembench {what}")
    if not isinstance(data, dict) or data.get("tool", {}).get("name") != "gpumembench":
        raise InputError(f'{path}: not a gpumembench {what} (no "tool": {{"name": "gpumembench"}})')
    return data


def byte_unit(largest):
    return ("GiB", GiB) if largest >= 10 * GiB else ("MiB", MiB)


def device_text(results):
    d = results.get("device", {})
    return f"{d.get('name', '?')} ({d.get('kind', '?')})"


def modeled_note(results):
    return "simulated device: throughput and native allocators' reserved memory are modeled" \
        if results.get("device", {}).get("kind") == "sim" else ""


def read_timeline(path):
    """(event, allocated, reserved, oom) columns of a timeline CSV, thinned to MAX_POINTS."""
    events, allocated, reserved, ooms = [], [], [], []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        need = {"event", "allocated_bytes", "reserved_bytes", "oom"}
        if not reader.fieldnames or not need.issubset(reader.fieldnames):
            raise InputError(f"{path}: not a gpumembench timeline (header needs {', '.join(sorted(need))})")
        rows = list(reader)
    stride = max(1, len(rows) // MAX_POINTS)
    for i, r in enumerate(rows):
        oom = r["oom"] == "1"
        if i % stride and not oom and i != len(rows) - 1:
            continue
        events.append(int(r["event"]))
        allocated.append(int(r["allocated_bytes"]))
        reserved.append(int(r["reserved_bytes"]))
        ooms.append(oom)
    return events, allocated, reserved, ooms


def step_rows(case):
    s = case.get("step_series") or {}
    cols = s.get("columns") or []
    return [dict(zip(cols, row)) for row in s.get("rows") or []]


def capacity_varies(results):
    return len({c.get("capacity_bytes") for c in results.get("cases", [])}) > 1


def capacity_text(case):
    b = case.get("capacity_bytes") or 0
    return f"{b / GiB:.2f} GiB" if b >= GiB else f"{b / MiB:.0f} MiB"


def case_name(case, results, many_workloads=False):
    """The allocator (and its settings), with the workload and the capacity where they vary."""
    t = case.get("allocator_label") or case.get("allocator") or case.get("label", "?")
    if many_workloads:
        t += " x " + (case.get("workload_label") or case.get("workload", ""))
    if capacity_varies(results):
        t += f" @ {capacity_text(case)}"
    return t


def case_title(case, results, many_workloads):
    t = case.get("allocator_label") or case.get("allocator") or case.get("label", "?")
    if capacity_varies(results):
        t += f" @ {capacity_text(case)}"
    if many_workloads:
        t += "\n" + (case.get("workload_label") or case.get("workload", ""))
    if case.get("memory_modeled"):
        t += " (reserved: modeled)"
    return t


# Per-step peaks in results.json's step_series (the most allocated / reserved at any moment of
# the step); older results have only the values at the step's end and the running peaks.
STEP_PEAK_COLUMNS = (("step_peak_allocated_bytes", "step_peak_reserved_bytes"),)


def step_peaks(steps):
    """(allocated, reserved) per step: the step's peaks where recorded, else None."""
    for a, r in STEP_PEAK_COLUMNS:
        if steps and a in steps[0] and r in steps[0]:
            return [s[a] for s in steps], [s[r] for s in steps]
    return None


def grid(n):
    cols = min(3, max(1, n))
    rows = math.ceil(n / cols)
    return rows, cols


def save(fig, out_dir, name, formats, written):
    for ext in formats:
        path = os.path.join(out_dir, f"{name}.{ext}")
        # No creation date in the PDF, so the same results give the same file.
        meta = {"CreationDate": None} if ext == "pdf" else {}
        fig.savefig(path, dpi=120, bbox_inches="tight", metadata=meta)
        written.append(path)
    plt.close(fig)


def plot_memory(results, results_dir, out_dir, formats, written):
    cases = [c for c in results["cases"] if "peak_reserved_bytes" in c]
    if not cases:
        return
    many_workloads = len({c.get("workload_label") for c in cases}) > 1
    largest = max(max(c["peak_reserved_bytes"], c.get("capacity_bytes") or 0) for c in cases)
    unit, div = byte_unit(largest)
    index = {id(c): i for i, c in enumerate(results["cases"])}
    timelines = {id(c): os.path.join(results_dir, "timelines", f"case{index[id(c)]:02d}.csv") for c in cases}
    per_event = all(os.path.exists(t) for t in timelines.values())
    rows, cols = grid(len(cases))
    # One x-axis for every panel (events or steps, never both), so panels line up.
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.4 * rows), squeeze=False, sharex=True, sharey=True)
    end_of_step = False
    for ax, case in zip(axes.flat, cases):
        if per_event:
            x, alloc, res, oom = read_timeline(timelines[id(case)])
            labels = ("allocated", "reserved")
        else:
            steps = step_rows(case)
            x = [r["step"] + 1 for r in steps]
            prev = [0] + [r["ooms"] for r in steps[:-1]]
            oom = [r["ooms"] > p for r, p in zip(steps, prev)]
            peaks = step_peaks(steps)
            if peaks:
                alloc, res = peaks
                labels = ("peak allocated in the step", "peak reserved in the step")
            else:
                # Older results.json: only the values at the end of each step, which miss the
                # peaks inside it; the running peaks show how high the step went.
                alloc = [r["allocated_bytes"] for r in steps]
                res = [r["reserved_bytes"] for r in steps]
                labels = ("allocated at the step's end", "reserved at the step's end")
                end_of_step = True
                ax.plot(x, [r["peak_reserved_bytes"] / div for r in steps], ":", color="tab:orange", linewidth=1,
                        label="peak reserved so far")
                ax.plot(x, [r["peak_allocated_bytes"] / div for r in steps], ":", color="tab:blue", linewidth=1,
                        label="peak allocated so far")
        style = {"marker": "o", "markersize": 3} if len(x) <= 50 else {}
        # Reserved wide underneath, allocated narrow on top: where they are equal both stay visible.
        ax.step(x, [v / div for v in res], where="post", label=labels[1], color="tab:orange", linewidth=3,
                alpha=0.7, zorder=2, **style)
        ax.step(x, [v / div for v in alloc], where="post", label=labels[0], color="tab:blue", linewidth=1.3,
                zorder=3, **style)
        cap = case.get("capacity_bytes") or 0
        if cap:
            ax.axhline(cap / div, color="black", linestyle="--", linewidth=1, label="capacity")
        ox = [xi for xi, o in zip(x, oom) if o]
        oy = [ri / div for ri, o in zip(res, oom) if o]
        if ox:
            ax.scatter(ox, oy, marker="x", color="red", zorder=5, label="OOM")
        ax.set_title(case_title(case, results, many_workloads), fontsize=9)
        ax.set_ylim(bottom=0, top=largest / div * 1.08)
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel(unit)
    xlabel = "event" if per_event else "step"
    for i, ax in enumerate(axes.flat):
        if not per_event:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        # The x label under the lowest visible panel of each column.
        col = i % cols
        last_row = (len(cases) - 1 - col) // cols
        if i // cols == last_row:
            ax.set_xlabel(xlabel)
            ax.xaxis.set_tick_params(labelbottom=True)
    for ax in list(axes.flat)[len(cases):]:
        ax.set_visible(False)
    # One legend for all panels, above them (a legend inside a panel hides its data).
    legend = {}
    for ax in list(axes.flat)[:len(cases)]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(l, h)
    fig.legend(list(legend.values()), list(legend.keys()), loc="upper center", ncol=min(len(legend), 4), fontsize=8,
               bbox_to_anchor=(0.5, 1.0), frameon=False)
    what = "per event" if per_event else ("at the end of each step (this results.json has no per-step peaks)"
                                          if end_of_step else "peaks per step")
    fig.suptitle(f"{results.get('config', {}).get('name', '')}: allocated vs reserved on {device_text(results)}, "
                 f"{what}", fontsize=11, y=1.04 + 0.02 * (len(legend) > 4))
    note = modeled_note(results)
    if note:
        fig.text(0.5, -0.01, note, ha="center", fontsize=8, style="italic")
    fig.tight_layout()
    save(fig, out_dir, "memory_over_time", formats, written)


def plot_fragmentation(results, out_dir, formats, written):
    cases = [c for c in results["cases"] if step_rows(c)]
    if not cases:
        return
    workloads = list(dict.fromkeys(c.get("workload_label", c.get("workload", "")) for c in cases))
    fig, axes = plt.subplots(len(workloads), 2, figsize=(11, 3.6 * len(workloads)), squeeze=False)
    for w, (ax_now, ax_run) in zip(workloads, axes):
        for case in (c for c in cases if c.get("workload_label", c.get("workload", "")) == w):
            steps = step_rows(case)
            x = [r["step"] + 1 for r in steps]
            peaks = step_peaks(steps)
            if peaks:  # each step's own peaks
                now = [1 - a / r if r else 0 for a, r in zip(*peaks)]
            else:
                now = [1 - r["allocated_bytes"] / r["reserved_bytes"] if r["reserved_bytes"] else 0 for r in steps]
            per_step_peaks = bool(peaks)
            # The tables' figure where recorded: at the moment of peak reserved so far.
            at_peak = bool(steps) and "allocated_at_peak_reserved_bytes" in steps[0]
            top = "allocated_at_peak_reserved_bytes" if at_peak else "peak_allocated_bytes"
            run = [1 - r[top] / r["peak_reserved_bytes"] if r["peak_reserved_bytes"] else 0 for r in steps]
            label = case_name(case, results) + (" (modeled)" if case.get("memory_modeled") else "")
            style = {"marker": "o", "markersize": 3} if len(x) <= 50 else {}
            ls = "--" if case.get("memory_modeled") else "-"
            ax_now.plot(x, [100 * v for v in now], ls, label=label, **style)
            ax_run.plot(x, [100 * v for v in run], ls, label=label, **style)
        ax_now.set_title(f"{w}\n" + ("each step: 1 - its peak allocated / its peak reserved" if per_step_peaks
                                      else "at the end of each step: 1 - allocated / reserved"), fontsize=9)
        ax_run.set_title(f"{w}\n" + ("so far, at peak reserved (the tables' figure): 1 - allocated then / peak reserved"
                                      if at_peak else "so far: 1 - peak allocated / peak reserved since the start"),
                         fontsize=9)
        for ax in (ax_now, ax_run):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("step")
            ax.set_ylabel("fragmentation (%)")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
        ax_run.legend(fontsize=7)
    fig.suptitle(f"Fragmentation over steps on {device_text(results)} (first run; dashed: modeled)", fontsize=11)
    fig.tight_layout()
    save(fig, out_dir, "fragmentation", formats, written)


def had_oom(case):
    return bool(case.get("ooms") or case.get("oom"))


def plot_throughput(results, out_dir, formats, written):
    cases = [c for c in results["cases"] if "peak_reserved_bytes" in c and "throughput" in c]
    if not cases:
        return
    # Tokens/s where every case that ran without an OOM counts tokens (a case stopped by an OOM
    # at its first step has none, yet it is a transformer case all the same).
    clean = [c for c in cases if not had_oom(c)] or cases
    use_tokens = all((c["throughput"].get("tokens_per_s") or 0) > 0 for c in clean)
    key = "tokens_per_s" if use_tokens else "steps_per_s"
    unit, div = byte_unit(max(c["peak_reserved_bytes"] for c in cases))
    many_workloads = len({c.get("workload_label") for c in cases}) > 1
    fig, ax = plt.subplots(figsize=(9, 5.5))
    ys_all = [c["throughput"].get(key) or 0 for c in cases]
    positive = [v for v in ys_all if v > 0]
    log = bool(positive) and max(positive) / min(positive) > 100
    # A case without a rate (no step ran) still gets its point: on the axis's floor.
    floor = (min(positive) / 3 if log else 0) if positive else 0
    shown_modeled = shown_measured = shown_oom = False
    names_at = {}  # cases at the same point share one label
    for i, case in enumerate(cases):
        color = f"C{i % 10}"
        x = case["peak_reserved_bytes"] / div
        y = case["throughput"].get(key) or 0
        oom = had_oom(case)
        name = case_name(case, results, many_workloads)
        if oom:
            o = case.get("oom") or {}
            name += f" (OOM at step {o.get('step', '?')}" + ("; no step ran)" if y <= 0 else ")")
        if y <= 0:
            y = floor
        spread = case.get("spread", {})
        xs = spread.get("peak_reserved_bytes", {})
        ys = spread.get(key, {})
        # Bars from the min-max over the repeats (clamped: newer matplotlib rejects negatives).
        xerr = [[max(0, x - xs.get("min", x * div) / div)], [max(0, xs.get("max", x * div) / div - x)]] \
            if xs and xs.get("max", 0) > xs.get("min", 0) else None
        yerr = [[max(0, y - ys.get("min", y))], [max(0, ys.get("max", y) - y)]] \
            if ys and ys.get("max", 0) > ys.get("min", 0) and not oom else None
        modeled = case["throughput"].get("modeled") or case.get("memory_modeled")
        if oom:
            # The rate of the steps an OOMed case ran is not a rival to a completed run's.
            ax.errorbar(x, y, xerr=xerr, fmt="X", markersize=10, color="red", capsize=3, clip_on=False, zorder=5)
        else:
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", markersize=8, color=color, capsize=3,
                        markerfacecolor="none" if modeled else color)
        shown_oom |= oom
        shown_modeled |= bool(modeled) and not oom
        shown_measured |= not modeled and not oom
        names_at.setdefault((x, y), []).append(name)
    # A label right of its point, above it; below it where an earlier label sits close by.
    xs_all = [p[0] for p in names_at] or [0]
    ys_pts = [p[1] for p in names_at] or [0]
    dx = (max(xs_all) - min(xs_all)) * 0.12 or 1
    dy = (max(ys_pts) - min(ys_pts)) * 0.06 or 1
    placed = []
    for (x, y), names in sorted(names_at.items()):
        crowded = any(abs(x - px) < dx and abs(y - py) < dy and above for px, py, above in placed)
        ax.annotate("\n".join(names), (x, y), textcoords="offset points", xytext=(6, -10 * len(names) - 4 if crowded else 4),
                    fontsize=7, color="red" if all("(OOM" in n for n in names) else "black")
        placed.append((x, y, not crowded))
    if log:
        ax.set_yscale("log")
        ax.set_ylim(bottom=floor / 1.5)
    else:
        ax.set_ylim(bottom=0)
    ax.set_xlabel(f"peak reserved ({unit})")
    ax.set_ylabel("tokens/s" if use_tokens else "steps/s")
    handles = []
    if shown_measured:
        handles.append(plt.Line2D([], [], marker="o", linestyle="", color="gray", label="measured"))
    if shown_modeled:
        handles.append(plt.Line2D([], [], marker="o", linestyle="", color="gray", markerfacecolor="none",
                                  label="modeled (simulated device)"))
    if shown_oom:
        handles.append(plt.Line2D([], [], marker="X", linestyle="", color="red",
                                  label="OOM: rate of the steps it ran, not comparable"))
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    runs = sorted({c.get("repeats", 1) for c in cases})
    ax.margins(x=0.25, y=0.15)
    if not many_workloads:
        ax.text(0.0, -0.14, cases[0].get("workload_label", ""), transform=ax.transAxes, fontsize=8)
    ax.set_title(f"Throughput against peak reserved on {device_text(results)}\n"
                 f"median of {'/'.join(map(str, runs))} run(s); bars: min-max", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save(fig, out_dir, "throughput_vs_memory", formats, written)


def frontier_value(param, v, div):
    return v / div if param == "capacity" else v


def plot_frontier(frontier, out_dir, formats, written):
    rows = [r for r in frontier.get("rows", []) if isinstance(r, dict)]
    if not rows:
        return
    param = frontier.get("param", "capacity")
    sim = frontier.get("device", {}).get("kind") == "sim"
    values = [v for r in rows for v in (r.get("frontier"), r.get("nearest_failure")) if v]
    unit, div = byte_unit(max(values) if values else 1) if param == "capacity" else ("", 1)
    axis = f"capacity ({unit})" if param == "capacity" else param
    capacities = sorted({r.get("capacity_bytes", 0) for r in rows})
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.55 * len(rows)))
    if param != "capacity" and len(capacities) > 1:
        # Largest passing batch / seq_len as the capacity grows, one line per allocator.
        cunit, cdiv = byte_unit(max(capacities))
        for key in dict.fromkeys((r.get("allocator"), r.get("workload")) for r in rows):
            pts = sorted((r.get("capacity_bytes", 0) / cdiv, r.get("frontier") or 0)
                         for r in rows if (r.get("allocator"), r.get("workload")) == key)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"{key[0]} x {key[1]}")
        ax.set_xlabel(f"capacity ({cunit})")
        ax.set_ylabel(f"largest {param} without OOM")
        ax.legend(fontsize=7)
        fig.set_size_inches(8, 5)
    else:
        labels = []
        for i, r in enumerate(rows):
            label = r.get("allocator", "?")
            if len({x.get("workload") for x in rows}) > 1:
                label += " x " + r.get("workload", "")
            modeled = sim and not str(r.get("allocator", "")).startswith("caching")
            if modeled:
                label += " (modeled)"
            labels.append(label)
            f = r.get("frontier")
            if f:
                ax.barh(i, frontier_value(param, f, div), color="tab:green", alpha=0.4 if modeled else 0.8,
                        hatch="//" if modeled else None)
                text = f"{frontier_value(param, f, div):.1f} {unit}" if param == "capacity" else f"{f}"
                ax.text(frontier_value(param, f, div) * 0.98, i, text, va="center", ha="right", fontsize=8,
                        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
            nf = r.get("nearest_failure")
            if nf:
                ax.scatter([frontier_value(param, nf, div)], [i], marker="x", color="red", zorder=5)
            probes = [p for p in r.get("probes", []) if isinstance(p, dict) and "value" in p]
            ax.scatter([frontier_value(param, p["value"], div) for p in probes], [i] * len(probes), s=8,
                       c=["tab:green" if p.get("passed") else "tab:red" for p in probes], zorder=4)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        if values:
            ax.set_xlim(0, 1.25 * max(frontier_value(param, v, div) for v in values))
        ax.set_xlabel(axis)
        ax.legend(handles=[
            plt.Rectangle((0, 0), 1, 1, color="tab:green", alpha=0.8, label="frontier (passes)"),
            plt.Line2D([], [], marker="x", linestyle="", color="red", label="nearest failure"),
            plt.Line2D([], [], marker="o", linestyle="", markersize=3, color="gray", label="probes run"),
        ], fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    direction = frontier.get("direction", "")
    ax.set_title(f"OOM frontier ({direction} {param}) on {device_text(frontier)}", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    save(fig, out_dir, "oom_frontier", formats, written)


def main(argv):
    ap = argparse.ArgumentParser(description="Plots of a gpumembench results folder (PNG and PDF).")
    ap.add_argument("results_dir", help="folder with results.json (and timelines/, frontier.json)")
    ap.add_argument("--out", help="output folder (default RESULTS_DIR/plots)")
    ap.add_argument("--formats", default="png,pdf", help="comma-separated: png, pdf, svg (default png,pdf)")
    args = ap.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f]
    bad = [f for f in formats if f not in ("png", "pdf", "svg")]
    if bad or not formats:
        sys.stderr.write(f"plot.py: --formats: '{','.join(bad)}' is not a format (valid: png, pdf, svg)\n")
        return 2
    if not os.path.isdir(args.results_dir):
        sys.stderr.write(f"plot.py: {args.results_dir}: not a folder (expected a gpumembench results folder)\n")
        return 2
    results_path = os.path.join(args.results_dir, "results.json")
    frontier_path = os.path.join(args.results_dir, "frontier.json")
    if not os.path.exists(results_path) and not os.path.exists(frontier_path):
        sys.stderr.write(f"plot.py: {args.results_dir}: has neither results.json nor frontier.json\n")
        return 2
    out_dir = args.out or os.path.join(args.results_dir, "plots")
    os.makedirs(out_dir, exist_ok=True)
    written = []
    try:
        if os.path.exists(results_path):
            results = load_json(results_path, "results.json")
            if not isinstance(results.get("cases"), list):
                raise InputError(f'{results_path}: not a gpumembench results.json (no "cases" list)')
            plot_memory(results, args.results_dir, out_dir, formats, written)
            plot_fragmentation(results, out_dir, formats, written)
            plot_throughput(results, out_dir, formats, written)
        if os.path.exists(frontier_path):
            plot_frontier(load_json(frontier_path, "frontier.json"), out_dir, formats, written)
    except InputError as e:
        sys.stderr.write(f"plot.py: {e}\n")
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
