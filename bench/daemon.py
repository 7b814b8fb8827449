#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench: what the always-on daemon costs, measured in one run.

- The Spyre job: the simulator's own timing of its job loop, with and
  without the daemon running, runs interleaved, medians compared.
- Everything else on the host: the daemon's openat hook sees every open on
  the machine (it must, to learn VFIO files), so an open/close loop of a
  process that has nothing to do with Spyre is timed the same way.
- The daemon itself: its CPU time in user space and the kernel's time in its
  BPF programs (the kernel's own count), per second of wall time, while
  scraped once a second (Prometheus is usually 15 s); and its RSS.

Usage: bench/daemon.py [--runs N]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SBT_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "spyre-bpftrace")
SIM = os.path.join(BUILD, "spyre-sim-run")
PORT = 19479

OPEN_LOOP = r"""
import os, sys, time
n = int(sys.argv[1])
t = time.perf_counter_ns()
for _ in range(n):
    os.close(os.open("/dev/null", os.O_RDONLY))
print(time.perf_counter_ns() - t)
"""


def sim_run(tmp):
    out = os.path.join(tmp, "sim.json")
    subprocess.run([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--threads", "2", "--jobs", "300",
                    "--json", out], check=True, stdout=subprocess.DEVNULL)
    return json.load(open(out))["elapsed_ns"]


def open_loop():
    r = subprocess.run([sys.executable, "-c", OPEN_LOOP, "200000"], capture_output=True, text=True,
                       check=True)
    return int(r.stdout)


def metrics():
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=5) as r:
        body = r.read().decode()
    vals = {}
    for line in body.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, v = line.split()
            vals[name] = float(v)
    return vals


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/daemon.py: needs root (BPF); hint: sudo make bench", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="sbt-bench-daemon-")
    os.makedirs(os.path.join(tmp, "mock"))
    sim_run(tmp)  # warm caches
    base_sim, base_open, with_sim, with_open = [], [], [], []
    cpu, bpf, wall, rss = [], [], [], []
    for i in range(args.runs):
        base_sim.append(sim_run(tmp))
        base_open.append(open_loop())
        d = subprocess.Popen([TOOL, "daemon", "--listen", f"127.0.0.1:{PORT}"],
                             stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                m0 = metrics()
                break
            except OSError:
                time.sleep(0.1)
        else:
            d.kill()
            print("bench/daemon.py: the daemon did not come up", file=sys.stderr)
            return 1
        c0, t0 = proc_cpu(d.pid), time.monotonic()
        with_sim.append(sim_run(tmp))
        with_open.append(open_loop())
        # a quiet stretch too, scraped once a second: the daemon's own cost
        # over work and idle alike
        for _ in range(3):
            time.sleep(1)
            metrics()
        m1 = metrics()
        c1, t1 = proc_cpu(d.pid), time.monotonic()
        rss.append(rss_mib(d.pid))
        d.terminate()
        d.wait(timeout=20)
        wall.append(t1 - t0)
        cpu.append(c1 - c0)
        bpf.append(m1.get("spyre_bpftrace_bpf_run_seconds_total", 0) -
                   m0.get("spyre_bpftrace_bpf_run_seconds_total", 0))
    ms = statistics.median
    res = {
        "runs": args.runs,
        "spyre_job_slowdown": ms(with_sim) / ms(base_sim),
        "other_process_open_loop_slowdown": ms(with_open) / ms(base_open),
        "open_close_ns_extra": (ms(with_open) - ms(base_open)) / 200000,
        # over all runs together: the kernel counts user time in 10 ms ticks
        "daemon_user_cpu_percent": 100 * sum(cpu) / sum(wall),
        "daemon_bpf_cpu_percent": 100 * sum(bpf) / sum(wall),
        "daemon_rss_mib_max": max(rss),
    }
    res["daemon_core_percent"] = res["daemon_user_cpu_percent"] + res["daemon_bpf_cpu_percent"]
    print(f"daemon: Spyre job {res['spyre_job_slowdown']:.4f}x with the daemon (median of {args.runs}, "
          f"job loop {ms(base_sim) / 1e6:.1f} ms); an unrelated open/close loop "
          f"{res['other_process_open_loop_slowdown']:.4f}x ({res['open_close_ns_extra']:+.0f} ns per open); "
          f"daemon {res['daemon_core_percent']:.3f}% of a core "
          f"({res['daemon_user_cpu_percent']:.3f}% user space, {res['daemon_bpf_cpu_percent']:.3f}% in BPF, "
          f"scraped 1/s), RSS {res['daemon_rss_mib_max']:.1f} MiB")
    with open(os.path.join(BUILD, "bench-daemon.json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
