#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench, recording's zero-loss ceiling: records per second the tracer
takes with none lost, through the real BPF programs.

A producer (build/bench/ioctl-load) makes VFIO-numbered ioctls on a file
under --vfio-path at a set rate, from the CPUs but the first, while
`record -c` traces it with its loader pinned to CPU 0. The rate doubles (then
steps up by halves) until records are lost or the producer cannot keep the
rate; for each step: what the producer did, what the capture holds (every
ioctl the producer made must be in it), what was lost, the tracer's CPU
(its own, from /proc), and the BPF programs' ns per record (the kernel's
run-time count, kernel.bpf_stats_enabled, while the step runs). Each
output (.sbt raw capture, .pftrace correlated live) with the default ring
buffer and the largest. Where it stops says what limits it: the producer
(syscall + BPF on its CPUs), the loader (the tracer at a full core), or the
ring buffer (lost with the loader not busy).

Usage: bench/ceiling.py [--seconds S] [--max-rate R]   (as root)
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from kernel_count import bpf_stats, proc_cpu, programs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SBT_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "spyre-bpftrace")
LOAD = os.path.join(BUILD, "bench", "ioctl-load")
def bpf_runtime(before):
    """(run_time_ns, run_cnt) summed over the programs loaded since `before`
    (the tracer's: nothing else loads programs while a step runs)."""
    ns = cnt = 0
    for i, p in programs().items():
        if i not in before:
            ns += p.get("run_time_ns", 0)
            cnt += p.get("run_cnt", 0)
    return ns, cnt


def step(tmp, rate, secs, threads, cpus, out_ext, buf):
    mock = os.path.join(tmp, "mock")
    os.makedirs(mock, exist_ok=True)
    open(os.path.join(mock, "vfio"), "w").close()
    out = os.path.join(tmp, "out" + out_ext)
    cmd = ["taskset", "-c", "0", TOOL, "-c",
           f"taskset -c {cpus} {LOAD} {mock}/vfio {rate} {secs} {threads}",
           "--vfio-path", f"{mock}/*", "--buffer-size", buf, "-o", out]
    before = programs()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the producer starts once the tracer has attached (a 1G ring buffer
    # takes a while): then two samples inside its steady state
    deadline = time.monotonic() + 60
    while len(programs()) == len(before) and p.poll() is None:
        if time.monotonic() > deadline:
            p.kill()
            sys.exit("ceiling: the tracer loaded no program in 60 s")
        time.sleep(0.05)
    attached = time.monotonic()
    time.sleep(0.7)
    c0, b0, t0 = proc_cpu(p.pid), bpf_runtime(before), time.monotonic()
    time.sleep(max(0.3, attached + secs - 0.3 - time.monotonic()))
    c1, b1, t1 = proc_cpu(p.pid), bpf_runtime(before), time.monotonic()
    stdout, stderr = p.communicate(timeout=secs * 10 + 60)
    if p.returncode:
        sys.exit(f"ceiling: the tracer failed ({p.returncode}): {stderr[-2000:]}")
    made = json.loads(stdout.strip().splitlines()[-1])
    m = re.search(r"# (\d+) records over [\d.]+ s: \d+ runtime calls, (\d+) ioctls, .* (\d+) lost", stderr)
    if not m:
        sys.exit(f"ceiling: no summary from the tracer: {stderr[-2000:]}")
    records, ioctls, lost = (int(x) for x in m.groups())
    runs = b1[1] - b0[1]
    return {"target": rate, "rate": made["rate"], "made": made["ioctls"], "records": records,
            "ioctls": ioctls, "lost": lost, "missing": made["ioctls"] - ioctls,
            "tracer_core": (c1 - c0) / (t1 - t0) if c0 is not None and c1 is not None else None,
            "bpf_ns_per_record": (b1[0] - b0[0]) / (made["rate"] * (t1 - t0)) if runs else None,
            "bpf_runs_per_record": runs / (made["rate"] * (t1 - t0)) if runs else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--max-rate", type=int, default=16_000_000)
    a = ap.parse_args()
    if os.geteuid():
        sys.exit("ceiling: needs root (it records); hint: sudo make bench")
    ncpu = os.cpu_count() or 1
    if ncpu < 2:
        sys.exit("ceiling: needs two CPUs or more: one for the loader, the rest for the producer")
    cpus, threads = f"1-{ncpu - 1}", max(1, ncpu - 1)
    tmp = tempfile.mkdtemp(prefix="sbt-bench-ceiling-")
    results = []
    with bpf_stats():
        for ext, buf in ((".sbt", "8M"), (".sbt", "1G"), (".pftrace", "8M"), (".pftrace", "1G")):
            best, rate, why = None, 250_000, None
            while rate <= a.max_rate:
                r = step(tmp, rate, a.seconds, threads, cpus, ext, buf)
                if not (r["lost"] or r["missing"]) and r["rate"] < 0.9 * rate:
                    r = step(tmp, rate, a.seconds, threads, cpus, ext, buf)  # short once: again
                core = r["tracer_core"]
                print(f"  {ext:8} {buf:>3} target {rate / 1e6:5.2f} M/s: made {r['rate'] / 1e6:5.2f} M/s, "
                      f"{r['lost']} lost, {r['missing']} missing; tracer {core * 100 if core is not None else float('nan'):3.0f}% "
                      f"of a core; BPF {r['bpf_ns_per_record'] or 0:.0f} ns/record "
                      f"({r['bpf_runs_per_record'] or 0:.1f} runs)", flush=True)
                if r["lost"] or r["missing"]:
                    why = ("the loader (the tracer at a full core)" if core and core > 0.9
                           else "the ring buffer (lost while the loader had time)")
                    break
                if not best or r["rate"] > best["rate"]:
                    best = r
                if r["rate"] < 0.9 * rate:
                    why = (f"the producer: {threads} thread(s) on CPU {cpus} make no more "
                           f"(syscall + {r['bpf_ns_per_record'] or 0:.0f} ns of BPF a record)")
                    break
                rate = rate * 2 if rate < 1_000_000 else rate + rate // 2
            else:
                why = f"--max-rate {a.max_rate}"
            results.append({"output": ext, "buffer": buf, "best": best, "stopped_by": why})
            print(f"  {ext} with a {buf} ring buffer: {best['rate'] / 1e6 if best else 0:.2f} M records/s with 0 "
                  f"lost; limited by {why}", flush=True)
    with open(os.path.join(BUILD, "bench-ceiling.json"), "w") as f:
        json.dump(results, f, indent=1)
    subprocess.run(["rm", "-rf", tmp])
    return 0


if __name__ == "__main__":
    sys.exit(main())
