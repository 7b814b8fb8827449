# SPDX-License-Identifier: GPL-2.0-only
"""What the benches read from the kernel: the BPF programs loaded (with
their run counts while kernel.bpf_stats_enabled is on) and a process's own
CPU time."""
import contextlib
import json
import os
import subprocess

STATS = "/proc/sys/kernel/bpf_stats_enabled"


def programs():
    """Every BPF program loaded: id -> bpftool's description (run_time_ns,
    run_cnt while the stats are on)."""
    out = subprocess.run(["bpftool", "prog", "show", "-j"], capture_output=True, text=True).stdout
    return {p["id"]: p for p in json.loads(out or "[]")}


@contextlib.contextmanager
def bpf_stats():
    """The kernel's count of BPF run time on, for the block; as it was after."""
    with open(STATS) as f:
        old = f.read().strip()
    with open(STATS, "w") as f:
        f.write("1")
    try:
        yield
    finally:
        with open(STATS, "w") as f:
            f.write(old)


def proc_cpu(pid):
    """utime + stime of pid's own threads (not its children), in seconds;
    None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def times_on_cpu(pid):
    """How many times pid's threads were put on a CPU (schedstat's third
    field): an idle process's wakes."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[2])
        except OSError:
            pass
    return total


def on_cpu_ns(pid):
    """ns pid's threads have run (user and kernel), from schedstat: exact,
    where utime/stime come in 10 ms ticks."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total
