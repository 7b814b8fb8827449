#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench, the wake-up hook: what record's sched_waking program (which
thread a card's interrupt woke) costs a program that has nothing to do
with Spyre and wakes up a lot: a pipe ping-pong (build/bench/pingpong, two
processes on one CPU, two wake-ups a round trip). By the kernel's own count
beside a running record with the hook and with --no-wake-hook (which
differ by the hook alone), and alone, interleaved, medians; and the
program's ns per run by the kernel's own count (kernel.bpf_stats_enabled,
in runs of their own). Goal: the hook at most +2%.

Usage: bench/wake_cost.py [--runs R] [--rounds N]   (as root)
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
def pingpong(n):
    return float(subprocess.run(["taskset", "-c", "1", PINGPONG, str(n)], capture_output=True, text=True,
                                check=True).stdout)


def beside_record(tmp, rounds, extra):
    """A round trip's ns beside a running record (tracer on CPU 0), and the
    irq_wake program's (run_cnt, run_time_ns) over it (None: not loaded)."""
    before = programs()
    # --irq: the hook is loaded where a card's interrupt can cause a
    # wake-up (a device on vfio-pci, or an --irq), here maybe neither
    rec = subprocess.Popen(["taskset", "-c", "0", TOOL, "-q", "--irq", "1", *extra, "-c", "sleep 600", "-o",
                            os.path.join(tmp, "r.sbt")], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    mine = {}
    while time.monotonic() < deadline and rec.poll() is None:
        mine = {i: p for i, p in programs().items() if i not in before}
        if any(p.get("name") == "task_rename" for p in mine.values()):  # the object's last
            break
        time.sleep(0.1)
    time.sleep(0.5)  # the rest of the object loaded and attached
    mine = {i: p for i, p in programs().items() if i not in before}
    hook = next((i for i, p in mine.items() if p.get("name") == "irq_wake"), None)
    p0 = programs().get(hook) if hook else None
    ns = pingpong(rounds)
    p1 = programs().get(hook) if hook else None
    rec.send_signal(signal.SIGINT)
    rec.wait(timeout=60)
    if not p0 or not p1:
        return ns, None
    return ns, (p1.get("run_cnt", 0) - p0.get("run_cnt", 0), p1.get("run_time_ns", 0) - p0.get("run_time_ns", 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=200000)
    a = ap.parse_args()
    if os.geteuid():
        sys.exit("wake_cost: needs root (it records); hint: sudo make bench")
    if (os.cpu_count() or 1) < 2:
        sys.exit("wake_cost: needs two CPUs: the tracer on one, the ping-pong on the other")
    tmp = tempfile.mkdtemp(prefix="sbt-bench-wake-")
    alone, hooked, unhooked, per_run, runs_per_trip = [], [], [], [], []
    try:
        pingpong(a.rounds // 10)  # warm
        for _ in range(a.runs):
            alone.append(pingpong(a.rounds))
            ns, _ = beside_record(tmp, a.rounds, ["--no-wake-hook"])
            unhooked.append(ns)
            ns, _ = beside_record(tmp, a.rounds, [])
            hooked.append(ns)
        # the kernel's count, in a run of its own (the count costs time too)
        with bpf_stats():
            for _ in range(3):
                _, stats = beside_record(tmp, a.rounds, [])
                if not stats:
                    sys.exit("wake_cost: the tracer loaded no irq_wake program")
                per_run.append(stats[1] / max(stats[0], 1))
                runs_per_trip.append(stats[0] / a.rounds)
    finally:
        subprocess.run(["rm", "-rf", tmp])
    med = statistics.median
    ratio = med(hooked) / med(unhooked)
    print(f"  pipe ping-pong (one CPU, {a.rounds} round trips, {a.runs} interleaved runs, medians): "
          f"{med(alone):.0f} ns a round trip alone, {med(unhooked):.0f} beside record --no-wake-hook, "
          f"{med(hooked):.0f} beside record: the wake-up hook {100 * (ratio - 1):+.2f}% (goal at most +2%)")
    print(f"  the kernel's count: {med(per_run):.0f} ns a run (with the counting's own cost), "
          f"{med(runs_per_trip):.2f} runs a round trip")
    with open(os.path.join(BUILD, "bench-wake.json"), "w") as f:
        json.dump({"alone_ns": alone, "unhooked_ns": unhooked, "hooked_ns": hooked, "hook_ratio": ratio,
                   "hook_ns_per_run": per_run, "runs_per_round_trip": runs_per_trip}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
