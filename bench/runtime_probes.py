#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench: what the runtime probes cost, side by side in one run.

1. An untraced process: B runs the simulator workload alone, and again while
   spyre-bpftrace traces another process A (-p A) that maps the same runtime
   library. Probes are attached to A only, so B should not notice: the
   ratio of B's medians is the goal (<= 1.05).
2. A traced process: the same workload untraced, under spyre-bpftrace, under
   a bpftrace script that only counts on the same functions (uprobe and
   uretprobe: two traps per call, as ours), and under the floor: empty BPF
   programs on exactly our sites (entries and return sites from
   `spyre-bpftrace list`, the same syscall tracepoints), attached to the
   process as ours are. The added time per traced call and the ratios
   ours/count-only and ours/floor (aim <= 1.3).

The simulator times its own job loop; runs are interleaved, medians compared.
Usage: bench/runtime_probes.py [--runs N] [--jobs J]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SBT_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "spyre-bpftrace")
SIM = os.path.join(BUILD, "spyre-sim-run")
FLOOR = os.path.join(BUILD, "bench", "bench-floor")
FLOOR_OBJ = os.path.join(BUILD, "bench", "floor.bpf.o")
LIBS = [os.path.join(BUILD, "sim", n) for n in ("libflex.so", "libsenlib.so")]
TPS = ["tp:syscalls:sys_enter_ioctl", "tp:syscalls:sys_exit_ioctl", "tp:syscalls:sys_enter_openat",
       "tp:syscalls:sys_exit_openat", "tp:syscalls:sys_enter_close"]


def sim_args(tmp, name, jobs, *extra):
    return [SIM, "--jobs", str(jobs), "--delay-us", "0", "--bytes", "4096", "--mock-dir",
            os.path.join(tmp, name + "-mock"), "--json", os.path.join(tmp, name + ".json"), *extra]


def elapsed(tmp, name):
    d = json.load(open(os.path.join(tmp, name + ".json")))
    assert not d["failed"]
    return d["elapsed_ns"], len(d["call_log"]), len(d["ioctls"])


def our_sites():
    """Entries and return sites, as the tracer puts them."""
    sites, funcs = [], []
    out = subprocess.run([TOOL, "list", *LIBS], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        lib, entry = f[0].rsplit("+", 1)
        assert "refused=" not in line, line
        sites.append(f"{lib}+{entry}")
        funcs.append((lib, f[1]))
        for kv in f[3:]:
            for off in kv.split("=", 1)[1].split(","):
                sites.append(f"{lib}+{off}")
    return sites, funcs


def mangled(funcs):
    names = {}
    for lib in LIBS:
        nm = subprocess.run(["nm", "-D", "--defined-only", "-C", lib], capture_output=True,
                            text=True, check=True).stdout
        raw = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                             check=True).stdout
        for d, m in zip(nm.splitlines(), raw.splitlines()):
            names[(lib, d.split(" ", 2)[2].split("(")[0])] = m.split()[-1]
    return [(lib, names[(lib, f)]) for lib, f in funcs]


def bpftrace_count_script(funcs):
    probes = ",\n".join(f"uprobe:{lib}:{s},\nuretprobe:{lib}:{s}" for lib, s in mangled(funcs))
    return (f"{probes}\n{{ @calls = count(); }}\n"
            "tracepoint:syscalls:sys_enter_ioctl, tracepoint:syscalls:sys_exit_ioctl,\n"
            "tracepoint:syscalls:sys_enter_openat, tracepoint:syscalls:sys_exit_openat,\n"
            "tracepoint:syscalls:sys_enter_close\n/pid == cpid/ { @sys = count(); }\n")


def run_traced(mode, tmp, jobs, script, sites):
    sim = sim_args(tmp, mode, jobs)
    cmd = " ".join(shlex.quote(a) for a in sim)
    if mode == "untraced":
        subprocess.run(sim, check=True, stdout=subprocess.DEVNULL)
    elif mode == "spyre-bpftrace":
        subprocess.run([TOOL, "-q", "-o", os.path.join(tmp, "out.sbt"), "--vfio-path",
                        os.path.join(tmp, mode + "-mock") + "/*", "-c", cmd], check=True)
    elif mode == "bpftrace-count":
        r = subprocess.run(["bpftrace", "-c", cmd, script], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit(f"bench: bpftrace failed: {r.stderr}")
    else:
        r = subprocess.run([FLOOR, "empty", FLOOR_OBJ, "-c", cmd, *sites], capture_output=True,
                           text=True)
        if r.returncode:
            sys.exit(f"bench: the floor run failed: {r.stderr}")
    ns, calls, ioctls = elapsed(tmp, mode)
    return ns, calls + ioctls


def untraced_neighbour(tmp, jobs, runs):
    """B's job loop alone, and while A is traced."""
    alone, beside = [], []
    for i in range(runs):
        subprocess.run(sim_args(tmp, "b", jobs), check=True, stdout=subprocess.DEVNULL)
        alone.append(elapsed(tmp, "b")[0])
        a = subprocess.Popen(sim_args(tmp, "a", 1, "--wait-stdin"), stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL)
        cap = os.path.join(tmp, "a.sbt")
        if os.path.exists(cap):
            os.unlink(cap)
        tr = subprocess.Popen([TOOL, "-q", "-o", cap, "-p", str(a.pid)], stderr=subprocess.PIPE)
        end = time.time() + 20
        while time.time() < end and not probes_in(cap):
            time.sleep(0.05)
        if not probes_in(cap):
            sys.exit("bench: the tracer did not attach to A")
        subprocess.run(sim_args(tmp, "b", jobs), check=True, stdout=subprocess.DEVNULL)
        beside.append(elapsed(tmp, "b")[0])
        a.stdin.write(b"g")
        a.stdin.close()
        a.wait()
        tr.wait()
        print(f"  run {i + 1}/{runs}: B alone {alone[-1] / 1e6:.1f} ms, "
              f"B while A is traced {beside[-1] / 1e6:.1f} ms", flush=True)
    return statistics.median(alone), statistics.median(beside)


def probes_in(cap):
    if not os.path.exists(cap):
        return False
    out = subprocess.run([TOOL, "dump", cap], capture_output=True, text=True).stdout
    return " probe" in out or ": probe " in out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1500)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root for BPF; hint: sudo make bench")
    tmp = tempfile.mkdtemp(prefix="sbt-bench-rt-")
    print("runtime probes, 1: the cost to a process that is not traced")
    alone, beside = untraced_neighbour(tmp, a.jobs, a.runs)
    neighbour = beside / alone
    print(f"  medians: B alone {alone / 1e6:.1f} ms, while A is traced {beside / 1e6:.1f} ms: "
          f"ratio {neighbour:.3f} (goal <= 1.05)\n")

    sites, funcs = our_sites()
    script = os.path.join(tmp, "count.bt")
    with open(script, "w") as f:
        f.write(bpftrace_count_script(funcs))
    sites += TPS
    modes = ["untraced", "spyre-bpftrace", "bpftrace-count", "floor"]
    times = {m: [] for m in modes}
    print(f"runtime probes, 2: a traced process ({len(sites) - len(TPS)} uprobe sites, "
          f"{len(TPS)} tracepoints)")
    for i in range(a.runs):
        for m in modes:
            ns, events = run_traced(m, tmp, a.jobs, script, sites)
            times[m].append(ns)
        print(f"  run {i + 1}/{a.runs}: " + "  ".join(f"{m} {times[m][-1] / 1e6:.1f} ms" for m in modes),
              flush=True)
    med = {m: statistics.median(times[m]) for m in modes}
    added = {m: (med[m] - med["untraced"]) / events for m in modes[1:]}
    print(f"\n  {a.jobs} jobs, {events} traced calls and ioctls per run; medians of {a.runs} runs")
    print(f"  {'':16} {'job loop ms':>12} {'added us/call':>14}")
    for m in modes:
        extra = f"{added[m] / 1e3:14.2f}" if m in added else ""
        print(f"  {m:16} {med[m] / 1e6:12.1f} {extra}")
    vs_count = added["spyre-bpftrace"] / added["bpftrace-count"]
    vs_floor = added["spyre-bpftrace"] / added["floor"]
    print(f"\n  ours / bpftrace count-only: {vs_count:.2f}x   ours / floor: {vs_floor:.2f}x (aim <= 1.3)")
    with open(os.path.join(BUILD, "bench-runtime-probes.json"), "w") as f:
        json.dump({"neighbour": {"alone_ns": alone, "beside_ns": beside, "ratio": neighbour},
                   "events": events, "runs": a.runs, "median_ns": med,
                   "added_ns_per_call": added, "vs_count": vs_count, "vs_floor": vs_floor}, f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
