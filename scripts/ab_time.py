#!/usr/bin/env python3
"""Times several gpumembench binaries on the same command, alternately, on one core.

    scripts/ab_time.py [--all-cores] [--pause SECONDS] RUNS BIN [BIN...] -- ARGS...

Runs `taskset -c 1 BIN ARGS...` (with --all-cores: `BIN ARGS...` on every core) RUNS times for each BIN, the order of the binaries reversed
every other round (so a busy minute falls on all of them alike), and prints for each the median,
lower quartile and minimum of its CPU time (user + sys of all threads, from os.wait4) and of its
wall time. A shared machine moves single runs by 10% or more: compare binaries only within one
call, and prefer the minimum and quartile to a single median.

--pause waits that long before every run. Back to back, a run finds the memory the run before
freed still mapped by the host; a virtual machine that hands freed memory back to its host (free
page reporting, some seconds after it is freed) makes a lone run's first touch of fresh memory
several times dearer. A pause of 5 s times what one command run alone costs there.
"""
import os
import statistics
import subprocess
import sys
import time


def main():
    pin = ["taskset", "-c", "1"]
    pause = 0.0
    while len(sys.argv) > 1 and sys.argv[1] in ("--all-cores", "--pause"):
        if sys.argv[1] == "--all-cores":
            pin = []
            del sys.argv[1]
        else:
            pause = float(sys.argv[2])
            del sys.argv[1:3]
    if "--" not in sys.argv or len(sys.argv) < 4:
        sys.exit(__doc__)
    sep = sys.argv.index("--")
    runs = int(sys.argv[1])
    bins, args = sys.argv[2:sep], sys.argv[sep + 1:]
    cpu = {b: [] for b in bins}
    wall = {b: [] for b in bins}
    for i in range(runs):
        for b in bins if i % 2 == 0 else bins[::-1]:
            if pause:
                time.sleep(pause)
            t0 = time.perf_counter()
            p = subprocess.Popen(pin + [b] + args, stdout=subprocess.DEVNULL)
            _, status, ru = os.wait4(p.pid, 0)
            if status:
                sys.exit(f"ab_time: {b} exited with status {status}")
            wall[b].append(time.perf_counter() - t0)
            cpu[b].append(ru.ru_utime + ru.ru_stime)
    for b in bins:
        c, w = sorted(cpu[b]), sorted(wall[b])
        print(f"{b}: CPU median {statistics.median(c) * 1e3:.1f} ms (quartile {c[len(c) // 4] * 1e3:.1f}, min {c[0] * 1e3:.1f}); "
              f"wall median {statistics.median(w) * 1e3:.1f} ms (min {w[0] * 1e3:.1f})")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
