#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench, converter part: records per second from a capture to a
Perfetto trace on one core, output bytes per event for Perfetto and for
Chrome JSON, on a synthetic capture of realistic Spyre job records, and
both writers' instructions per record (callgrind, when valgrind is there).

Usage: bench/convert.py [--records N] [--runs R]
"""
import argparse
import json
import os
import re
import shutil
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


CALLGRIND_RECORDS = 500_000
GOALS = {".pftrace": 400, ".json": 2094}  # #22: Perfetto 400, Chrome JSON half of 4,187


def instructions_per_record(tmp):
    """Instructions per record of the whole convert process for each
    writer, by valgrind's callgrind on a fixed synthetic capture: the same
    on any machine. None when valgrind is not installed."""
    if not shutil.which("valgrind"):
        print("  instructions per record: valgrind not installed, not counted (apt-get install valgrind)")
        return None
    cap = os.path.join(tmp, "callgrind.sbt")
    out = subprocess.run([GEN, cap, str(CALLGRIND_RECORDS)], check=True, capture_output=True, text=True)
    records = int(out.stdout.split()[0])
    got = {}
    for ext in (".pftrace", ".json"):
        got[ext] = convert_instructions(cap, records, os.path.join(tmp, "cg" + ext))
        print(f"  {ext[1:]:8} {got[ext]:7.0f} instructions/record, whole convert process "
              f"(callgrind, {records} records; goal <= {GOALS[ext]})")
    os.unlink(cap)
    return got


def convert_instructions(cap, records, out):
    """Instructions per record of the whole `convert cap -o out` process,
    by valgrind's callgrind (out's extension picks the writer); out and
    callgrind's file are removed after."""
    cg = out + ".callgrind"
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}", TOOL, "convert", cap,
                        "-o", out], capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", r.stderr)
    if r.returncode or not m:
        sys.exit(f"bench: callgrind of convert to {out} failed:\n{r.stderr[-2000:]}")
    for p in (cg, out):
        os.unlink(p)
    return int(m.group(1)) / records


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
    instr = instructions_per_record(tmp)
    with open(os.path.join(BUILD, "bench-convert.json"), "w") as f:
        json.dump({"records": records, "seconds": secs, "records_per_s": rate,
                   "instructions_per_record": instr,
                   "perfetto_bytes_per_record": pf_bytes / records,
                   "json_bytes_per_record": js_bytes / records,
                   "perfetto_over_json": pf_bytes / js_bytes}, f, indent=1)
    for p in (cap, pf, js):
        os.unlink(p)
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
