#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench-check: the writers' instructions per record (callgrind, the
whole `convert` process on gen-capture's fixed capture: the same count on
any machine of one build) held against bench/budget.json. A writer over
its budget by more than 5% fails; one under it by more than 5% says the
budget can come down. Tuning the writers has reached its end: this holds
what it reached.

Usage: bench/check.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from convert import GEN, ROOT, convert_instructions

SLACK = 0.05


def main():
    if not shutil.which("valgrind"):
        print("bench-check: valgrind is not installed; hint: make deps (or apt-get install valgrind)")
        return 1
    budget = json.load(open(os.path.join(ROOT, "bench", "budget.json")))
    tmp = tempfile.mkdtemp(prefix="sbt-bench-check-")
    try:
        cap = os.path.join(tmp, "c.sbt")
        out = subprocess.run([GEN, cap, str(budget["records"])], check=True, capture_output=True, text=True)
        records = int(out.stdout.split()[0])
        bad = 0
        for name, ext in (("perfetto", ".pftrace"), ("chrome_json", ".json")):
            got, want = convert_instructions(cap, records, os.path.join(tmp, "out" + ext)), budget[name]
            verdict = "ok"
            if got > want * (1 + SLACK):
                verdict = f"FAIL: over its budget by {100 * (got / want - 1):.1f}% (more than {SLACK:.0%})"
                bad += 1
            elif got < want * (1 - SLACK):
                verdict = f"ok, {100 * (1 - got / want):.1f}% under: bench/budget.json can come down"
            print(f"bench-check: {name:12} {got:7.1f} instructions/record, budget {want} ({records} records): "
                  f"{verdict}")
        return 1 if bad else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
