#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench, the wake-up hook: what finding the thread a card's interrupt
woke costs a program that has nothing to do with Spyre and wakes up a lot:
a pipe ping-pong (build/bench/pingpong, two processes on one CPU, two
wake-ups a round trip).

First record's default hook (here, with no fentry and no kprobes, read at
the interrupt only: no program on any wake-up) against record without it
(--no-wake-hook), both with --irq 1 (which loads the hook), in turns, the
order rotated: the ping-pong's median of 3 runs beside each, and how often
record's programs ran meanwhile by the kernel's count. Goal: at most +2%.

Then the hook asked for with --wake-hook sched_waking (every wake-up of
the host), beside a running record --no-wake-hook. That hook itself,
the very program from record's object (build/bpf/irq.bpf.o), is attached
and detached around runs of the ping-pong by build/bench/hook-toggle, in
pairs close in time, ABBA; the figure is the median of the pairs' ratios,
beside the same for an empty program on sched_waking (build/bench/
floor.bpf.o empty_waking), in turns: what any hook there costs.
Then the program's ns per run by the kernel's own count
(kernel.bpf_stats_enabled, in pairs of their own).

With --guest, the same question in the x86 guest (scripts/vm.sh, one
edu card on vfio-pci), where the kernel takes fentry: the ping-pong alone
and beside record -c of an idle command with the wake-up hook on the
interrupt's eventfd (the default there), on sched_waking (--wake-hook
sched_waking) and without it (--no-wake-hook), in turns; each figure the
fastest of 3 runs, and how often record's programs ran meanwhile (all of
them, by the kernel's count): the emulator's timing moves by 10-20%, the
count does not. Each turn runs alone, then beside a fresh recording of
each kind, their order rotated from turn to turn, so that the emulator's
drift falls on all alike.

Usage: bench/wake_cost.py [--pairs P] [--rounds N] [--turns-host T]   (as root)
       bench/wake_cost.py --guest [--turns T]
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


def start_record(tmp, *opts):
    """record on CPU 0 (with --irq 1, which loads the wake-up hook, and
    opts), running until stopped; with the ids of its programs."""
    before = programs()
    rec = subprocess.Popen(["taskset", "-c", "0", TOOL, "-q", "--irq", "1", *opts, "-c", "sleep 600",
                            "-o", os.path.join(tmp, "r.sbt")], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    mine = {}
    while time.monotonic() < deadline and rec.poll() is None:
        mine = {i: p for i, p in programs().items() if i not in before}
        if any(p.get("name") == "task_rename" for p in mine.values()):  # the object's last
            break
        time.sleep(0.1)
    if rec.poll() is not None:
        sys.exit("wake_cost: record did not start")
    time.sleep(0.5)  # the rest of the object loaded and attached
    return rec, set(i for i in programs() if i not in before)


def stop_record(rec):
    rec.send_signal(signal.SIGINT)
    rec.wait(timeout=60)


def run_count(ids):
    """Runs of these programs so far (bpf_stats on)."""
    return sum(p.get("run_cnt", 0) for i, p in programs().items() if i in ids)


def default_hook(turns, rounds):
    """The ping-pong beside record with its default hook and beside record
    --no-wake-hook, in turns: {kind: [(median ns a round trip, program runs
    a round trip)]}, and the default's plan line."""
    res = {"default": [], "no_wake_hook": []}
    order = ["default", "no_wake_hook"]
    tmp = tempfile.mkdtemp(prefix="sbt-bench-wake-")
    plan = subprocess.run([TOOL, "-v", "--irq", "1", "-d", "0.1", "-o", os.path.join(tmp, "plan.sbt"),
                           "-c", "true"], capture_output=True, text=True).stderr
    line = next((ln.strip() for ln in plan.splitlines() if ln.strip().startswith("wake ")), "wake: not in the plan")
    try:
        with bpf_stats():
            for t in range(turns):
                for kind in (order if t % 2 == 0 else order[::-1]):
                    rec, ids = start_record(tmp, *(["--no-wake-hook"] if kind == "no_wake_hook" else []))
                    try:
                        before = run_count(ids)
                        times = [pingpong(rounds) for _ in range(3)]
                        runs = run_count(ids) - before
                    finally:
                        stop_record(rec)
                    res[kind].append((statistics.median(times), runs / (3 * rounds)))
    finally:
        subprocess.run(["rm", "-rf", tmp])
    return res, line


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


# In the guest (busybox sh): the sum of run_cnt and run_time_ns over the
# programs a process holds.
GUEST_SCRIPT = r"""
runs() { c=0; t=0; for f in /proc/$1/fdinfo/*; do
    x=$(sed -n 's/^run_cnt:[[:space:]]*//p' $f 2>/dev/null); [ -n "$x" ] && c=$((c+x))
    x=$(sed -n 's/^run_time_ns:[[:space:]]*//p' $f 2>/dev/null); [ -n "$x" ] && t=$((t+x))
  done; echo "$c $t"; }
best() { for k in 1 2 3; do build/bench/pingpong $ROUNDS; done | sort -n | head -1; }
echo 1 > /proc/sys/kernel/bpf_stats_enabled
build/bench/pingpong $ROUNDS > /dev/null
order="eventfd sched_waking no_wake_hook"
for turn in $(seq $TURNS); do
  echo "alone $(best) 0 0" >> /out/wake.txt
  # each kind first, second and last in turn: no kind always follows another
  set -- $order; order="$2 $3 $1"
  for m in $order; do
    case $m in eventfd) o='';; sched_waking) o='--wake-hook sched_waking';; no_wake_hook) o='--no-wake-hook';; esac
    : > /out/$m.log
    build/spyre-bpftrace -v --device 1234:11e8 $o -o /tmp/w.sbt -c 'sleep 100000' 2>> /out/$m.log & R=$!
    # the plan's last line shows once every probe is in place; then the
    # command runs: record's child
    i=0; while [ $i -lt 900 ] && ! grep -q '^  task ' /out/$m.log; do sleep 0.5; i=$((i+1)); done
    sleep 1
    S=$(cat /proc/$R/task/$R/children 2>/dev/null)
    [ -n "$S" ] || { echo "record did not attach ($m)"; cat /out/$m.log; kill $R; exit 1; }
    b=$(runs $R); t=$(best); a=$(runs $R)
    echo "$m $t $(( ${a% *} - ${b% *} )) $(( ${a#* } - ${b#* } ))" >> /out/wake.txt
    kill $S; wait $R
    sleep 2 # the kernel frees record's programs
  done
done
"""


def guest(turns, rounds):
    """The figures in the x86 guest, by scripts/vm.sh."""
    if not os.path.exists(PINGPONG):
        sys.exit(f"wake_cost: {PINGPONG} missing; hint: make {PINGPONG}")
    tmp = tempfile.mkdtemp(prefix="sbt-bench-wake-")
    try:
        out = os.path.join(tmp, "out")
        cmd = f"ROUNDS={rounds}; TURNS={turns}; " + GUEST_SCRIPT
        r = subprocess.run([os.path.join(ROOT, "scripts", "vm.sh"), "--edu", "1", "--out", out, "--timeout", "2700",
                            "--", cmd], capture_output=True, text=True, env=dict(os.environ, SBT_BUILD=BUILD))
        rows = []
        if os.path.exists(os.path.join(out, "wake.txt")):
            rows = [ln.split() for ln in open(os.path.join(out, "wake.txt")).read().splitlines()]
        if r.returncode or len(rows) != 4 * turns:
            sys.exit(f"wake_cost: the guest run failed ({r.returncode}), {len(rows)} of {4 * turns} rows:\n"
                     f"{r.stderr[-3000:]}")
    finally:
        subprocess.run(["rm", "-rf", tmp])
    med = statistics.median
    by = {}
    for m, t, runs, ns in rows:
        by.setdefault(m, []).append((float(t), int(runs), int(ns)))
    alone = med(t for t, _, _ in by["alone"])
    res = {"alone_ns": alone, "turns": turns, "round_trips": rounds, "rows": rows}
    print(f"  x86 guest (TCG), pipe ping-pong, {rounds} round trips a run, each figure the fastest of 3 "
          f"runs, medians of {turns} turns (alone, then a recording of each kind, in turn): "
          f"{alone:.0f} ns a round trip alone")
    for m in ("eventfd", "sched_waking", "no_wake_hook"):
        t = med(x[0] for x in by[m])
        runs = med(x[1] for x in by[m]) / (3 * rounds)
        ns = med(x[2] / max(x[1], 1) for x in by[m])
        res[m] = {"ns": t, "ratio": t / alone, "runs_per_round_trip": runs, "ns_per_run": ns}
        lo, hi = min(x[0] for x in by[m]), max(x[0] for x in by[m])
        print(f"  beside record, wake hook {m.replace('_', ' ')}: {t:.0f} ns ({100 * (t / alone - 1):+.1f}%; "
              f"{lo:.0f} to {hi:.0f}); "
              f"record's programs ran {runs:.2f} times a round trip (the count's own reads of /proc "
              f"included)" + (f", {ns:.0f} ns a run" if runs else ""))
    nohook = res["no_wake_hook"]["ns"]
    for m in ("eventfd", "sched_waking"):
        print(f"  the hook on {m.replace('_', ' ')} against record without it: "
              f"{100 * (res[m]['ns'] / nohook - 1):+.1f}% wall clock (goal at most +2%), "
              f"{res[m]['runs_per_round_trip'] - res['no_wake_hook']['runs_per_round_trip']:+.2f} program runs "
              f"a round trip")
    with open(os.path.join(BUILD, "bench-wake-guest.json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--guest", action="store_true", help="measure in the x86 guest (fentry there)")
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--turns-host", type=int, default=6, help="turns of the default-hook comparison")
    a = ap.parse_args()
    if a.guest:
        return guest(a.turns, 3000 if a.rounds == 20000 else a.rounds)
    if os.geteuid():
        sys.exit("wake_cost: needs root (it records); hint: sudo make bench")
    if (os.cpu_count() or 1) < 2:
        sys.exit("wake_cost: needs two CPUs: the tracer on one, the ping-pong on the other")
    pingpong(a.rounds)  # warm
    med = statistics.median
    byk, line = default_hook(a.turns_host, a.rounds)
    d_ns, n_ns = med(x[0] for x in byk["default"]), med(x[0] for x in byk["no_wake_hook"])
    d_runs, n_runs = med(x[1] for x in byk["default"]), med(x[1] for x in byk["no_wake_hook"])
    print(f"  record's default hook here: {line}")
    print(f"  pipe ping-pong beside record --irq 1 (one CPU, {a.rounds} round trips a run, medians of "
          f"{a.turns_host} turns, order rotated): {d_ns:.0f} ns a round trip with the default hook, "
          f"{n_ns:.0f} with --no-wake-hook: the hook {100 * (d_ns / n_ns - 1):+.2f}% (goal at most +2%); "
          f"record's programs ran {d_runs:.3f} and {n_runs:.3f} times a round trip by the kernel's count "
          f"(the hook {d_runs - n_runs:+.3f})")
    tmp = tempfile.mkdtemp(prefix="sbt-bench-wake-")
    rec = None
    try:
        rec, _ = start_record(tmp, "--no-wake-hook")
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
            stop_record(rec)
        subprocess.run(["rm", "-rf", tmp])
    ratios = sorted(on / off for off, on in pairs)
    q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
    floor = med(on / off for off, on in empty)
    off, on = med(p[0] for p in pairs), med(p[1] for p in pairs)
    ratio = med(ratios)
    per_run = stats[1] / max(stats[0], 1)
    runs_per_trip = stats[0] / (3 * a.rounds)
    print(f"  --wake-hook sched_waking, its program toggled beside record --no-wake-hook (one CPU, {a.rounds} "
          f"round trips a run, {len(pairs)} pairs, ABBA): {off:.0f} ns a round trip without it, {on:.0f} with it: "
          f"{100 * (ratio - 1):+.2f}% (median of the pairs' ratios; quartiles {100 * (q1 - 1):+.2f}% "
          f"{100 * (q3 - 1):+.2f}%; goal at most +2%); an empty program on sched_waking, the same way: "
          f"{100 * (floor - 1):+.2f}%")
    print(f"  the kernel's count: {per_run:.0f} ns a run (with the counting's own cost), "
          f"{runs_per_trip:.2f} runs a round trip")
    with open(os.path.join(BUILD, "bench-wake.json"), "w") as f:
        json.dump({"default_hook": byk, "default_hook_plan": line, "default_hook_ratio": d_ns / n_ns,
                   "pairs_ns": pairs, "hook_ratio": ratio, "empty_pairs_ns": empty, "empty_ratio": floor, "hook_ratio_quartiles": [q1, q3],
                   "hook_ns_per_run": per_run, "runs_per_round_trip": runs_per_trip}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
