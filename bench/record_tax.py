#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench, what recording costs other processes: in the x86 QEMU guest
(vfio loaded, fentry there), an unrelated process's getppid loop
(build/spyre-syscall-loop) alone and beside `record -p` of a simulator
calling the runtime: once with record on vfio's handlers (no syscall
tracepoint attached), once on the syscall tracepoints (--driver-probes
off). Interleaved, each figure the fastest of three runs, medians. The
emulator moves by 10-20% run to run: compare the two ratios of one run.

Usage: bench/record_tax.py [--rounds R]   (as root; needs QEMU, make deps)
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "e2e"))
import run as e2e  # noqa: E402  (the guest harness)

LOOP = "for k in 1 2 3; do build/spyre-syscall-loop 100000; done | sort -n | head -1 >> /out/{}.txt; "
START = ("build/spyre-sim-run --no-card --jobs 100000 --delay-us 1000 > /dev/null & S=$!; sleep 1; "
         "build/spyre-bpftrace -q -v {extra} -p $S -o /out/{name}.sbt 2> /out/{name}.log & T=$!; sleep 4; ")
STOP = "kill -INT $T; wait $T; kill $S; sleep 1; "


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    cmd = "build/spyre-syscall-loop 200000 > /dev/null; "
    for _ in range(a.rounds):
        for name, extra in (("driver", ""), ("tracepoint", "--driver-probes off")):
            cmd += LOOP.format("base") + START.format(extra=extra, name=name) + LOOP.format(name) + STOP
    try:
        out, _ = e2e.run_in_guest(tempfile.mkdtemp(prefix="sbt-tax-"), 1, cmd, 300 + 120 * a.rounds)
    except e2e.Skip as s:
        print(f"record's tax on other processes: skipped ({s})")
        return
    read = lambda n: [float(x) for x in open(os.path.join(out, n)).read().split()]
    base, drv, tp = read("base.txt"), read("driver.txt"), read("tracepoint.txt")
    for name in ("driver", "tracepoint"):
        hooks = [l.split(None, 2)[2].split()[0] for l in open(os.path.join(out, name + ".log")).read().splitlines()
                 if l.startswith("  ioctl ") and " -> " in l]
        print(f"  {name}: ioctls on {hooks[0] if hooks else '?'}")
    m = statistics.median
    print(f"record's tax on other processes (x86 guest, getppid): {m(base):.0f} ns alone, "
          f"{m(drv) / m(base):.3f}x beside record on vfio's handlers, "
          f"{m(tp) / m(base):.3f}x beside it on the syscall tracepoints "
          f"(medians of {len(base)}, {len(drv)}, {len(tp)}; each the fastest of 3 runs)")


if __name__ == "__main__":
    main()
