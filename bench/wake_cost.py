#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench, the wake-up hook: what record's sched_waking program (which
thread a card's interrupt woke) costs a program that has nothing to do
with Spyre and wakes up a lot: a pipe ping-pong (build/bench/pingpong, two
processes on one CPU, two wake-ups a round trip), beside a running record
(--no-wake-hook: everything of record's but the hook). The hook itself,
the very program from record's object (build/bpf/irq.bpf.o), is attached
and detached around runs of the ping-pong by build/bench/hook-toggle, in
pairs close in time, ABBA; the figure is the median of the pairs' ratios,
beside the same for an empty program on sched_waking (build/bench/
floor.bpf.o empty_waking), in turns: what any hook there costs.
Then the program's ns per run by the kernel's own count
(kernel.bpf_stats_enabled, in pairs of their own). Goal: the hook at most
+2%.

Usage: bench/wake_cost.py [--pairs P] [--rounds N]   (as root)
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from kernel_count import bpf_stats, programs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SBT_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "spyre-bpftrace")
PINGPONG = os.path.join(BUILD, "bench", "pingpong")
TOGGLE = os.path.join(BUILD, "bench", "hook-toggle")
OBJ = os.path.join(BUILD, "bpf", "irq.bpf.o")
FLOOR = os.path.join(BUILD, "bench", "floor.bpf.o")  # empty_waking: a hook doing nothing


def pingpong(n):
    return float(subprocess.run(["taskset", "-c", "1", PINGPONG, str(n)], capture_output=True, text=True,
                                check=True).stdout)


def start_record(tmp):
    """record --no-wake-hook on CPU 0, running until stopped: all of
    record's programs but the hook, loaded and attached."""
    before = programs()
    # --irq: the hook would be loaded (a device on vfio-pci, or an --irq)
    rec = subprocess.Popen(["taskset", "-c", "0", TOOL, "-q", "--irq", "1", "--no-wake-hook", "-c", "sleep 600",
                            "-o", os.path.join(tmp, "r.sbt")], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and rec.poll() is None:
        mine = {i: p for i, p in programs().items() if i not in before}
        if any(p.get("name") == "task_rename" for p in mine.values()):  # the object's last
            break
        time.sleep(0.1)
    if rec.poll() is not None:
        sys.exit("wake_cost: record did not start")
    time.sleep(0.5)  # the rest of the object loaded and attached
    return rec


def toggled(pairs, rounds, obj=OBJ, prog="irq_wake"):
    """[(off_ns, on_ns)] a round trip, and the program's (runs, run_time_ns)."""
    out = subprocess.run([TOGGLE, obj, prog, str(pairs), "--", "taskset", "-c", "1", PINGPONG, str(rounds)],
                         capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"wake_cost: hook-toggle failed: {out.stderr.strip()}")
    got, stats = [], (0, 0)
    for line in out.stdout.splitlines():
        w = line.split()
        if w[0] == "on":
            got.append((float(w[1]), float(w[2])))
        elif w[0] == "runs":
            stats = (int(w[1]), int(w[3]))
    return got, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=20000)
    a = ap.parse_args()
    if os.geteuid():
        sys.exit("wake_cost: needs root (it records); hint: sudo make bench")
    if (os.cpu_count() or 1) < 2:
        sys.exit("wake_cost: needs two CPUs: the tracer on one, the ping-pong on the other")
    tmp = tempfile.mkdtemp(prefix="sbt-bench-wake-")
    rec = None
    try:
        pingpong(a.rounds)  # warm
        rec = start_record(tmp)
        pairs, empty = [], []
        # the hook and an empty program on the same tracepoint, in turns
        for _ in range(5):
            pairs += toggled(a.pairs // 5, a.rounds)[0]
            empty += toggled(a.pairs // 5, a.rounds, FLOOR, "empty_waking")[0]
        # the kernel's count, in pairs of their own (the count costs time too)
        with bpf_stats():
            _, stats = toggled(3, a.rounds)
    finally:
        if rec:
            rec.send_signal(signal.SIGINT)
            rec.wait(timeout=60)
        subprocess.run(["rm", "-rf", tmp])
    med = statistics.median
    ratios = sorted(on / off for off, on in pairs)
    q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
    floor = med(on / off for off, on in empty)
    off, on = med(p[0] for p in pairs), med(p[1] for p in pairs)
    ratio = med(ratios)
    per_run = stats[1] / max(stats[0], 1)
    runs_per_trip = stats[0] / (3 * a.rounds)
    print(f"  pipe ping-pong beside record --no-wake-hook (one CPU, {a.rounds} round trips a run, {len(pairs)} "
          f"pairs, ABBA): {off:.0f} ns a round trip without the hook, {on:.0f} with it; the hook "
          f"{100 * (ratio - 1):+.2f}% (median of the pairs' ratios; quartiles {100 * (q1 - 1):+.2f}% "
          f"{100 * (q3 - 1):+.2f}%; goal at most +2%); an empty program on sched_waking, the same way: "
          f"{100 * (floor - 1):+.2f}%")
    print(f"  the kernel's count: {per_run:.0f} ns a run (with the counting's own cost), "
          f"{runs_per_trip:.2f} runs a round trip")
    with open(os.path.join(BUILD, "bench-wake.json"), "w") as f:
        json.dump({"pairs_ns": pairs, "hook_ratio": ratio, "empty_pairs_ns": empty, "empty_ratio": floor, "hook_ratio_quartiles": [q1, q3],
                   "hook_ns_per_run": per_run, "runs_per_round_trip": runs_per_trip}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
