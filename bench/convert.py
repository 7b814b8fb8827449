#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench, converter part: records per second from a capture to a
Perfetto trace on one core, and output bytes per event for Perfetto and for
Chrome JSON, on a synthetic capture of realistic Spyre job records.

Usage: bench/convert.py [--records N] [--runs R]
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
GEN = os.path.join(BUILD, "bench", "gen-capture")


def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5_000_000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="sbt-bench-convert-")
    cap = os.path.join(tmp, "synthetic.sbt")
    out = subprocess.run([GEN, cap, str(a.records)], check=True, capture_output=True, text=True)
    records = int(out.stdout.split()[0])
    pf, js = os.path.join(tmp, "out.pftrace"), os.path.join(tmp, "out.json")
    one_core = ["taskset", "-c", "0"]
    subprocess.run(["cat", cap], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    secs = [timed(one_core + [TOOL, "convert", cap, "-o", pf]) for _ in range(a.runs)]
    insp = subprocess.run([TOOL, "inspect", pf], capture_output=True, text=True)
    if insp.returncode:
        sys.exit(f"bench: the converted trace fails inspect:\n{insp.stdout}")
    json_secs = timed(one_core + [TOOL, "convert", cap, "-o", js])
    pf_bytes, js_bytes, cap_bytes = os.path.getsize(pf), os.path.getsize(js), os.path.getsize(cap)
    med = statistics.median(secs)
    rate = records / med
    print(f"capture: {records} records ({cap_bytes / records:.1f} bytes/record, {cap_bytes >> 20} MiB)")
    print(f"  convert to Perfetto, one core: median {med:.2f} s of {a.runs} -> "
          f"{rate / 1e6:.2f} M records/s (goal >= 5)")
    print(f"  convert to Chrome JSON, one core: {json_secs:.2f} s")
    print(f"  Perfetto {pf_bytes / records:.1f} bytes/record, Chrome JSON {js_bytes / records:.1f} "
          f"bytes/record: Perfetto is {pf_bytes / js_bytes:.2f} of JSON (goal <= 0.25)")
    with open(os.path.join(BUILD, "bench-convert.json"), "w") as f:
        json.dump({"records": records, "seconds": secs, "records_per_s": rate,
                   "perfetto_bytes_per_record": pf_bytes / records,
                   "json_bytes_per_record": js_bytes / records,
                   "perfetto_over_json": pf_bytes / js_bytes}, f, indent=1)
    for p in (cap, pf, js):
        os.unlink(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
