#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench: what tracing costs the traced process, side by side in one run.

The same simulator workload runs untraced, under spyre-bpftrace, and under a
bpftrace script on the same probes (the same uprobes and uretprobes on the
runtime's entry points, the same ioctl tracepoints, doing the same work per
hit: per-thread call stack, arguments, return value, duration). The
simulator times its own job loop, so tracer start-up is not counted. Runs
are interleaved and the medians compared.

Usage: bench/overhead.py [--runs N] [--jobs J]
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SBT_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "spyre-bpftrace")
SIM = os.path.join(BUILD, "spyre-sim-run")
LIBS = [os.path.join(BUILD, "sim", n) for n in ("libflex.so", "libsenlib.so")]


def builtin_symbols():
    """The mangled names our built-in table resolves to in the simulator."""
    syms = []
    for lib in LIBS:
        nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                            check=True).stdout
        for line in nm.splitlines():
            name = line.split()[-1]
            if name.startswith(("_ZN4flex", "_ZN6senlib")):
                syms.append((lib, name))
    return syms


def bpftrace_script(syms):
    targets = ",\n".join(f"uprobe:{lib}:{s}" for lib, s in syms)
    rtargets = ",\n".join(f"uretprobe:{lib}:{s}" for lib, s in syms)
    return f"""
{targets}
/pid == cpid/
{{
  $d = @depth[tid];
  @ts[tid, $d] = nsecs;
  @depth[tid] = $d + 1;
  printf("E %d %s %lx %lx %lx %lx %lx %lx\\n", tid, probe, arg0, arg1, arg2, arg3, arg4, arg5);
}}
{rtargets}
/pid == cpid/
{{
  $d = @depth[tid] - 1;
  @depth[tid] = $d;
  printf("X %d %s %ld %lu\\n", tid, probe, retval, nsecs - @ts[tid, $d]);
  delete(@ts[tid, $d]);
}}
tracepoint:syscalls:sys_enter_ioctl
/pid == cpid/
{{
  @io_ts[tid] = nsecs; @io_fd[tid] = args->fd; @io_cmd[tid] = args->cmd;
}}
tracepoint:syscalls:sys_exit_ioctl
/@io_ts[tid]/
{{
  printf("I %d %d %x %ld %lu\\n", tid, @io_fd[tid], @io_cmd[tid], args->ret, nsecs - @io_ts[tid]);
  delete(@io_ts[tid]); delete(@io_fd[tid]); delete(@io_cmd[tid]);
}}
"""


def run(mode, tmp, jobs, script):
    sim_json = os.path.join(tmp, f"{mode}.json")
    mock = os.path.join(tmp, "mock")
    sim = [SIM, "--jobs", str(jobs), "--delay-us", "0", "--bytes", "4096",
           "--mock-dir", mock, "--json", sim_json]
    cmd = " ".join(shlex.quote(a) for a in sim)
    # spyre-bpftrace: the raw capture, which `dump` checks record by record
    cap = os.path.join(tmp, "out.sbt" if mode == "spyre-bpftrace" else "out.txt")
    if mode == "untraced":
        subprocess.run(sim, check=True, stdout=subprocess.DEVNULL)
    elif mode == "spyre-bpftrace":
        subprocess.run([TOOL, "-q", "-o", cap, "--vfio-path", mock + "/*", "-c", cmd], check=True)
    else:
        r = subprocess.run(["bpftrace", "-o", cap, "-c", cmd, script], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode:
            sys.exit(f"bench: bpftrace failed: {r.stderr}")
    d = json.load(open(sim_json))
    assert not d["failed"]
    calls, ioctls = len(d["call_log"]), len(d["ioctls"])
    if mode != "untraced":
        check_complete(mode, cap, calls, ioctls)
    return d["elapsed_ns"], calls + ioctls


def check_complete(mode, path, calls, ioctls):
    """Both tracers must have seen every call and ioctl, or the comparison is void."""
    if mode == "spyre-bpftrace":
        out = subprocess.run([TOOL, "dump", path], capture_output=True, text=True, check=True).stdout
        kinds = [ln.split(": ", 1)[1].split(" ", 1)[0] for ln in out.splitlines()]
        got = (kinds.count("call_enter"), kinds.count("call_exit"), kinds.count("ioctl"))
        lost = "lost" in kinds
    else:
        lines = open(path).read().splitlines()
        got = tuple(sum(1 for ln in lines if ln.startswith(k + " ")) for k in "EXI")
        lost = any("Lost" in ln for ln in lines)
    if got != (calls, calls, ioctls) or lost:
        sys.exit(f"bench: {mode} saw {got} calls/returns/ioctls of {(calls, calls, ioctls)}"
                 f"{' and lost events' if lost else ''}; the comparison would be void")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1500)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root for BPF; hint: sudo make bench")
    tmp = tempfile.mkdtemp(prefix="sbt-bench-")
    script = os.path.join(tmp, "same-probes.bt")
    with open(script, "w") as f:
        f.write(bpftrace_script(builtin_symbols()))
    modes = ["untraced", "spyre-bpftrace", "bpftrace"]
    times = {m: [] for m in modes}
    events = 0
    for i in range(a.runs):
        for m in modes:  # interleaved, so drift hits all three alike
            ns, events = run(m, tmp, a.jobs, script)
            times[m].append(ns)
        print(f"  run {i + 1}/{a.runs}: " + "  ".join(f"{m} {times[m][-1] / 1e6:.1f} ms" for m in modes),
              flush=True)
    med = {m: statistics.median(times[m]) for m in modes}
    added = {m: (med[m] - med["untraced"]) / events for m in modes[1:]}
    print(f"\nworkload: {a.jobs} jobs, {events} traced calls and ioctls per run; medians of {a.runs} runs")
    print(f"  {'':16} {'job loop ms':>12} {'added us/event':>15}")
    for m in modes:
        extra = f"{added[m] / 1e3:15.2f}" if m in added else f"{'':>15}"
        print(f"  {m:16} {med[m] / 1e6:12.1f} {extra}")
    ratio = added["spyre-bpftrace"] / added["bpftrace"]
    print(f"\nspyre-bpftrace / bpftrace added cost: {ratio:.2f}x (goal: <= 1.0, aim 0.8)")
    with open(os.path.join(BUILD, "bench-overhead.json"), "w") as f:
        json.dump({"events": events, "runs": a.runs, "median_ns": med,
                   "added_ns_per_event": added, "ratio": ratio}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
