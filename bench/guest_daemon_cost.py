#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench-daemon-guest: the daemon's BPF per VFIO ioctl where it hooks
vfio's own file handlers (fentry), against the floor of empty entry and
return programs on the same three handlers, by the kernel's own count, in
the x86 guest (QEMU, real vfio-pci, edu cards; scripts/vm.sh).

In the guest, in turns, --rounds times: bench-floor's empty programs on
the handlers while the simulator drives the card; the daemon (defaults:
--sample-ioctls 16) under `ctl cost` while the same run drives it. ns a
VFIO ioctl = the kernel's run time of the programs on the handlers over
their entry runs. The guest is an emulator (TCG): its ns are not a
machine's; the ratio to the floor is what this says.

Usage: bench/guest_daemon_cost.py [--rounds N] [--jobs N]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "e2e"))
from test_guests import run_in_guest  # noqa: E402

HANDLERS = ("vfio_fops_unl_ioctl", "vfio_group_fops_unl_ioctl", "vfio_device_fops_unl_ioctl")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=60, help="the simulator's jobs a run")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench-daemon-guest: needs root (QEMU with KVM or TCG, vfio in the guest)")
        return 1
    sim = f"build/spyre-sim-run --backend vfio --card 0000:00:03.0 --threads 1 --jobs {args.jobs} --bytes 16384"
    cmd = ("ip link set lo up; echo 1 > /proc/sys/kernel/bpf_stats_enabled; "
           "build/spyre-bpftrace daemon --device 1234:11e8 --listen 127.0.0.1:9471 --state-dir /tmp/st "
           "--runtime-dir /tmp/rn --no-sampling --no-triggers 2>> /out/daemon.log & D=$!; "
           "for i in $(seq 120); do wget -q -O /dev/null http://127.0.0.1:9471/healthz && break; sleep 1; done; "
           "kill $D; wait $D; ")
    for r in range(args.rounds):
        cmd += (f"build/bench/bench-floor fentry build/bench/floor.bpf.o -c '{sim}' >> /out/floor.txt 2>&1; "
                "build/spyre-bpftrace daemon --device 1234:11e8 --listen 127.0.0.1:9471 --state-dir /tmp/st "
                "--runtime-dir /tmp/rn --no-sampling --no-triggers 2>> /out/daemon.log & D=$!; "
                "for i in $(seq 120); do wget -q -O /dev/null http://127.0.0.1:9471/healthz && break; sleep 1; done; "
                f"build/spyre-bpftrace ctl --runtime-dir /tmp/rn cost --seconds 60 > /out/cost{r}.txt & C=$!; "
                f"sleep 1; {sim} > /dev/null; "
                # the daemon's stop ends the measure and answers ctl cost with it
                "kill $D; wait $D; wait $C; ")
    tmp = tempfile.mkdtemp(prefix="sbt-gcost-")
    t0 = time.time()
    # the TSC as the guest's clock: TCG's default, the HPET, is an emulated device whose every
    # read (each BPF clock read) costs tens of microseconds, and would be all this measures
    os.environ["SBT_VM_APPEND"] = "clocksource=tsc tsc=reliable"
    cmd = "cat /sys/devices/system/clocksource/clocksource0/current_clocksource > /out/clock.txt; " + cmd
    out, _ = run_in_guest(tmp, 1, cmd, 1800)
    clock = open(os.path.join(out, "clock.txt")).read().strip()
    floor = []
    for line in open(os.path.join(out, "floor.txt")):
        if "fentry_ns_per_call" in line:
            w = line.split()
            floor.append(float(w[w.index("fentry_ns_per_call") + 1]))
    daemon, whole = [], []
    for r in range(args.rounds):
        rows = {}
        for line in open(os.path.join(out, f"cost{r}.txt")):
            w = line.split()
            if len(w) == 4 and w[1].isdigit():
                rows[w[0]] = (int(w[1]), float(w[2]))
        runs = sum(rows.get(f"{h}_fentry", (0, 0))[0] for h in HANDLERS)
        ns = sum(n * per for name, (n, per) in rows.items()
                 if any(name in (f"{h}_fentry", f"{h}_fexit") for h in HANDLERS))
        all_ns = sum(n * per for name, (n, per) in rows.items() if name != "all")
        if runs:
            daemon.append(ns / runs)
            whole.append(all_ns / runs)
    if not floor or not daemon:
        print("bench-daemon-guest: no figures; the guest's output:", os.listdir(out))
        print(open(os.path.join(out, "daemon.log")).read()[-3000:])
        return 1
    print("  the daemon's programs in the last round (ctl cost):")
    print("    " + "\n    ".join(ln.rstrip() for ln in open(os.path.join(out, f"cost{args.rounds - 1}.txt"))
                                   if ln.split() and ln.split()[0] != "ok"))
    med = statistics.median
    print(f"bench-daemon-guest: {time.strftime('%Y-%m-%d')}, x86 guest (QEMU TCG, clock {clock}), {args.rounds} "
          f"rounds of {args.jobs} jobs, {time.time() - t0:.0f} s; the kernel's count, medians")
    print(f"  floor (empty fentry/fexit on vfio's handlers): {med(floor):8.1f} ns a VFIO ioctl   {floor}")
    print(f"  daemon, on the same handlers:                 {med(daemon):8.1f} ns a VFIO ioctl   "
          f"{med(daemon) / med(floor):.2f}x the floor")
    print(f"  daemon, all its programs over those ioctls:   {med(whole):8.1f} ns   {med(whole) / med(floor):.2f}x "
          f"(with vfio's DMA, pinning and interrupt hooks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
