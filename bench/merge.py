#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench, merge part: seconds and peak memory (max RSS) of `merge` of
a PyTorch profiler trace of 50k, 200k and 800k ops (the real fixture's
steps repeated, bench/gen_kineto.py) with the fixture's capture, against
the size of the JSON. Goal: under 256 MiB at 800k ops, growing far slower
than the input.

Usage: bench/merge.py [--ops 50000,200000,800000] [--runs R]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SBT_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "spyre-bpftrace")
FIXTURE = os.path.join(ROOT, "tests", "torch", "fixture")


def run(cmd):
    """Seconds and max RSS (KiB) of one run of cmd."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode:
        sys.exit(f"bench: {' '.join(cmd)} failed: {p.stderr.read().decode()}")
    p.stderr.close()
    return secs, ru.ru_maxrss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="50000,200000,800000")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sbt-bench-merge-")
    cap = os.path.join(FIXTURE, "capture.sbt")
    rows = []
    for n in (int(x) for x in a.ops.split(",")):
        src = os.path.join(tmp, f"torch-{n}.json")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_kineto.py"), "--ops", str(n), "-o", src],
                       check=True, stderr=subprocess.DEVNULL)
        out = os.path.join(tmp, "out.pftrace")
        runs = [run([TOOL, "merge", src, cap, "-o", out]) for _ in range(a.runs)]
        secs = statistics.median(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        size = os.path.getsize(src)
        rows.append({"ops": n, "json_bytes": size, "seconds": secs, "max_rss_kib": rss})
        print(f"  merge {n:>7} ops ({size / 2**20:6.1f} MiB of JSON): median {secs:5.2f} s of {a.runs}, "
              f"max RSS {rss / 1024:6.1f} MiB ({rss * 1024 / n:5.0f} bytes/op)")
        os.unlink(src)
        os.unlink(out)
    if len(rows) > 1:
        d_rss = (rows[-1]["max_rss_kib"] - rows[0]["max_rss_kib"]) * 1024
        d_json = rows[-1]["json_bytes"] - rows[0]["json_bytes"]
        d_ops = rows[-1]["ops"] - rows[0]["ops"]
        print(f"  growth: {d_rss / d_ops:.0f} bytes of memory per op, {d_rss / d_json:.2f} of the JSON's "
              f"growth; largest {rows[-1]['max_rss_kib'] / 1024:.0f} MiB (goal < 256 at 800k ops)")
    with open(os.path.join(BUILD, "bench-merge.json"), "w") as f:
        json.dump(rows, f, indent=1)
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
