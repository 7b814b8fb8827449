#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench: what the always-on daemon costs, measured in one run.

- The Spyre job: the simulator's own timing of its job loop, with and
  without the daemon running, runs interleaved, medians compared.
- Everything else on the host: the daemon's syscall tracepoints (ioctl)
  put every process's system calls on the kernel's slower traced path, so
  an open/close loop of a process that has nothing to do with Spyre is
  timed the same way.
- The daemon itself: its CPU time in user space and the kernel's time in its
  BPF programs (the kernel's own count), per second of wall time, while
  scraped once a second (Prometheus is usually 15 s); and its RSS.
- A detail window: the same job with a `ctl record` window open on it (its
  runtime calls by uprobes into the flight recorder), against without; the
  difference over the calls the window recorded is the cost per traced call.
  And what an open window costs everything else: the open/close loop and a
  getppid loop of a process that does not use the runtime, in the window
  and out of it (the daemon running both times).

The always-on runs turn sampling and triggers off (the mock card's ioctls
all fail, which would trigger a window): they measure the always-on tier.

- Under a steady load: the daemon's threads (schedstat, exact) and its BPF
  while a producer makes --rate VFIO ioctls a second on a mock file.

Usage: bench/daemon.py [--runs N] [--rate N] [--only ioctl]
"""
import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from kernel_count import bpf_stats
import urllib.request

from kernel_count import on_cpu_ns, proc_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SBT_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "spyre-bpftrace")
SIM = os.path.join(BUILD, "spyre-sim-run")
LOAD = os.path.join(BUILD, "bench", "ioctl-load")
PORT = 19479

OPEN_LOOP = r"""
import os, sys, time
n = int(sys.argv[1])
t = time.perf_counter_ns()
for _ in range(n):
    os.close(os.open("/dev/null", os.O_RDONLY))
print(time.perf_counter_ns() - t)
"""


PPID_LOOP = r"""
import os, sys, time
n = int(sys.argv[1])
t = time.perf_counter_ns()
for _ in range(n):
    os.getppid()
print(time.perf_counter_ns() - t)
"""


def sim_run(tmp):
    out = os.path.join(tmp, "sim.json")
    subprocess.run([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--threads", "2", "--jobs", "300",
                    "--json", out], check=True, stdout=subprocess.DEVNULL)
    return json.load(open(out))["elapsed_ns"]


def ready_sim(tmp, name):
    """A job that set up its card and waits on stdin to run its loop."""
    p = subprocess.Popen([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--threads", "2", "--jobs", "300",
                          "--wait-ready", "--json", os.path.join(tmp, name)],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    for _ in range(400):
        with open(f"/proc/{p.pid}/syscall") as f:
            if f.read().startswith("0 0x0 "):  # blocked in read(0, ...)
                return p
        time.sleep(0.01)
    p.kill()
    raise RuntimeError("the simulator did not get ready")


def go(p, tmp, name):
    p.stdin.write(b"g")
    p.stdin.close()
    p.wait(timeout=120)
    return json.load(open(os.path.join(tmp, name)))["elapsed_ns"]


def window_cost(tmp, runs):
    """ns per traced call: the job inside a ctl record window and outside."""
    quiet = ["--no-sampling", "--no-triggers", "--state-dir", os.path.join(tmp, "state"),
             "--runtime-dir", os.path.join(tmp, "run"), "--vfio-path", os.path.join(tmp, "mock")]
    d = subprocess.Popen([TOOL, "daemon", "--listen", f"127.0.0.1:{PORT}", *quiet], stderr=subprocess.DEVNULL)
    ctl = [TOOL, "ctl", "--runtime-dir", os.path.join(tmp, "run")]
    base, inside, calls = [], [], []
    loops = {"open_out": [], "open_in": [], "ppid_out": [], "ppid_in": []}
    try:
        while not os.path.exists(os.path.join(tmp, "run", "control")):
            time.sleep(0.05)
        for i in range(runs):
            base.append(go(ready_sim(tmp, "b.json"), tmp, "b.json"))
            loops["open_out"].append(open_loop())
            loops["ppid_out"].append(loop(PPID_LOOP, 2000000))
            p = ready_sim(tmp, "w.json")
            out = os.path.join(tmp, f"w{i}.sbt")
            rec = subprocess.Popen(ctl + ["record", "--seconds", "6", "-o", out], stdout=subprocess.DEVNULL)
            while "window request" not in subprocess.run(ctl + ["status"], capture_output=True,
                                                         text=True).stdout:
                time.sleep(0.02)
            time.sleep(0.2)  # its libraries found and probed
            inside.append(go(p, tmp, "w.json"))
            loops["open_in"].append(open_loop())
            loops["ppid_in"].append(loop(PPID_LOOP, 2000000))
            assert "window request" in subprocess.run(ctl + ["status"], capture_output=True, text=True).stdout, \
                "the window closed before the loops ended: make it longer"
            rec.wait(timeout=60)
            dump = subprocess.run([TOOL, "dump", out], capture_output=True, text=True).stdout
            calls.append(sum(1 for line in dump.splitlines() if " call_enter " in line and f" {p.pid}/" in line))
    finally:
        d.terminate()
        d.wait(timeout=30)
    ms = statistics.median
    other = {k: ms(loops[f"{k}_in"]) / ms(loops[f"{k}_out"]) for k in ("open", "ppid")}
    return (ms(inside) - ms(base)) / ms(calls), ms(calls), ms(inside) / ms(base), other


def loop(code, n=200000):
    r = subprocess.run([sys.executable, "-c", code, str(n)], capture_output=True, text=True, check=True)
    return int(r.stdout)


def open_loop():
    return loop(OPEN_LOOP)


def metrics():
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=5) as r:
        body = r.read().decode()
    vals = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, v = line.rsplit(" ", 1)
            if name.startswith("spyre_bpftrace_bpf_run"):  # each program apart too
                vals[name] = float(v)
            name = name.split("{")[0]  # summed over labels (program, ...)
            vals[name] = vals.get(name, 0.0) + float(v)
    return vals


IOCTL_FLOOD = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
for _ in range(int(sys.argv[3])):
    try:
        fcntl.ioctl(fd, int(sys.argv[2], 0))
    except OSError:
        pass
"""


def ioctl_cost(tmp, n=200000):
    """ns in the kernel's count per run of the ioctl programs, for a VFIO
    ioctl (on a mock VFIO file), VFIO's number on a file that is not VFIO's,
    and any other ioctl (every ioctl of the host runs them)."""
    mock = os.path.join(tmp, "mock", "cost")
    os.makedirs(mock, exist_ok=True)
    open(os.path.join(mock, "vfio"), "w").close()
    d = subprocess.Popen([TOOL, "daemon", "--listen", f"127.0.0.1:{PORT}", "--no-sampling", "--no-triggers",
                          "--state-dir", os.path.join(tmp, "state"), "--runtime-dir", os.path.join(tmp, "run"),
                          "--vfio-path", os.path.join(tmp, "mock")], stderr=subprocess.DEVNULL)
    res = {}
    try:
        for _ in range(100):
            try:
                metrics()
                break
            except OSError:
                time.sleep(0.1)
        for what, path, cmd in (("vfio", os.path.join(mock, "vfio"), "0x3b64"), ("fake_vfio", "/dev/null", "0x3b64"),
                                ("other", "/dev/null", "0x5401")):
            a = metrics()
            subprocess.run([sys.executable, "-c", IOCTL_FLOOD, path, cmd, str(n)], check=True)
            b = metrics()
            ns = 0.0
            for p in ("ioctl_enter", "ioctl_exit"):
                secs = f'spyre_bpftrace_bpf_run_seconds_total{{program="{p}"}}'
                runs = f'spyre_bpftrace_bpf_runs_total{{program="{p}"}}'
                ns += (b[secs] - a[secs]) * 1e9 / max(b[runs] - a[runs], 1)
            res[what] = ns
    finally:
        d.terminate()
        d.wait(timeout=30)
    return res


def steady_cost(tmp, rate, seconds, full=False):
    """The daemon (flight recorder on, as shipped) under a steady rate of
    VFIO ioctls on a mock VFIO file, scraped once a second: its own CPU and
    the kernel's time in its BPF programs, each in % of a core. A young
    daemon's recorder is still taking memory (a page fault each 4 KiB of
    it, a minute at 10,000/s for the default 64 MiB); full: a 4 MiB one,
    filled first, as every recorder is after its first minutes."""
    warm = 8 if full else 0
    mock = os.path.join(tmp, "mock", "steady")
    os.makedirs(mock, exist_ok=True)
    open(os.path.join(mock, "vfio"), "w").close()
    d = subprocess.Popen([TOOL, "daemon", "--listen", f"127.0.0.1:{PORT}", "--no-sampling", "--no-triggers",
                          "--state-dir", os.path.join(tmp, "state"), "--runtime-dir", os.path.join(tmp, "run"),
                          "--vfio-path", os.path.join(tmp, "mock")] + (["--recorder-mib", "4"] if full else []),
                         stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                metrics()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(1)  # start-up done
        load = subprocess.Popen([LOAD, os.path.join(mock, "vfio"), str(rate), str(seconds + warm)],
                                stdout=subprocess.PIPE, text=True)
        for _ in range(warm):
            time.sleep(1)
            metrics()
        m0, c0, t0 = metrics(), on_cpu_ns(d.pid), time.monotonic()
        while load.poll() is None:
            time.sleep(1)
            metrics()
        done = json.loads(load.stdout.read())
        m1, c1, t1 = metrics(), on_cpu_ns(d.pid), time.monotonic()
    finally:
        d.terminate()
        d.wait(timeout=30)
    wall = t1 - t0
    bpf = m1["spyre_bpftrace_bpf_run_seconds_total"] - m0["spyre_bpftrace_bpf_run_seconds_total"]
    return {"rate": done["rate"], "user_percent": 100 * (c1 - c0) / 1e9 / wall, "bpf_percent": 100 * bpf / wall}


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--rate", type=int, default=10000, help="VFIO ioctls a second for the steady load")
    ap.add_argument("--only", choices=("ioctl",), help="ioctl: only the per-ioctl BPF cost and the steady load")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/daemon.py: needs root (BPF); hint: sudo make bench", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="sbt-bench-daemon-")
    atexit.register(shutil.rmtree, tmp, True)  # whichever way the bench ends
    # the daemon keeps the kernel's BPF statistics off (ctl cost turns them
    # on for a while): the bench counts its programs' run time throughout,
    # so it turns them on for its run, and back as they were
    with bpf_stats():
        return measure(args, tmp)


def measure(args, tmp):
    """Every figure of the bench, printed; 0."""
    os.makedirs(os.path.join(tmp, "mock"))
    costs = [ioctl_cost(tmp) for _ in range(args.runs if args.only else 1)]
    steady = [steady_cost(tmp, args.rate, 10) for _ in range(3 if args.only else 1)]
    steady_full = [steady_cost(tmp, args.rate, 10, full=True) for _ in range(3 if args.only else 1)]
    ms = statistics.median
    cost = {k: ms(c[k] for c in costs) for k in costs[0]}
    st = {k: ms(x[k] for x in steady) for k in steady[0]}
    sf = {k: ms(x[k] for x in steady_full) for k in steady_full[0]}
    print(f"daemon: BPF per ioctl, by the kernel's count (enter + exit, 200,000 each, median of {len(costs)}): "
          f"{cost['vfio']:.0f} ns a VFIO ioctl (goal 300), {cost['fake_vfio']:.0f} ns VFIO's number on "
          f"/dev/null, {cost['other']:.0f} ns any other ioctl of the host")
    print(f"daemon: at a steady {st['rate']:.0f} VFIO ioctls/s (flight recorder on, scraped 1/s, median of "
          f"{len(steady)}): {st['user_percent'] + st['bpf_percent']:.3f}% of a core ({st['user_percent']:.3f}% "
          f"the daemon's threads, {st['bpf_percent']:.3f}% its BPF; goal 0.3)")
    print(f"daemon: the same with its flight recorder full (4 MiB, filled first; a 64 MiB one is after about "
          f"a minute at this rate): {sf['user_percent'] + sf['bpf_percent']:.3f}% of a core "
          f"({sf['user_percent']:.3f}% the daemon's threads, {sf['bpf_percent']:.3f}% its BPF)")
    if args.only:
        return 0
    sim_run(tmp)  # warm caches
    base_sim, base_open, with_sim, with_open = [], [], [], []
    cpu, bpf, wall, rss = [], [], [], []
    for i in range(args.runs):
        base_sim.append(sim_run(tmp))
        base_open.append(open_loop())
        d = subprocess.Popen([TOOL, "daemon", "--listen", f"127.0.0.1:{PORT}", "--no-sampling",
                              "--no-triggers", "--state-dir", os.path.join(tmp, "state"),
                              "--vfio-path", os.path.join(tmp, "mock")],
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
    res.update({"bpf_ns_per_vfio_ioctl": cost["vfio"], "bpf_ns_per_fake_vfio_ioctl": cost["fake_vfio"],
                "bpf_ns_per_other_ioctl": cost["other"], "steady_ioctls_per_s": st["rate"],
                "steady_daemon_percent": st["user_percent"], "steady_bpf_percent": st["bpf_percent"],
                "steady_full_daemon_percent": sf["user_percent"], "steady_full_bpf_percent": sf["bpf_percent"]})
    per_call, ncalls, ratio, other = window_cost(tmp, args.runs)
    res.update({"window_ns_per_traced_call": per_call, "window_calls_per_run": ncalls,
                "window_job_slowdown": ratio, "window_other_open_loop_slowdown": other["open"],
                "window_other_getppid_loop_slowdown": other["ppid"]})
    print(f"daemon: Spyre job {res['spyre_job_slowdown']:.4f}x with the daemon (median of {args.runs}, "
          f"job loop {ms(base_sim) / 1e6:.1f} ms); an unrelated open/close loop "
          f"{res['other_process_open_loop_slowdown']:.4f}x ({res['open_close_ns_extra']:+.0f} ns per open); "
          f"daemon {res['daemon_core_percent']:.3f}% of a core "
          f"({res['daemon_user_cpu_percent']:.3f}% user space, {res['daemon_bpf_cpu_percent']:.3f}% in BPF, "
          f"scraped 1/s), RSS {res['daemon_rss_mib_max']:.1f} MiB")
    print(f"daemon: in a detail window the job runs {ratio:.3f}x, {per_call:.0f} ns per traced call "
          f"({ncalls:.0f} calls recorded a run, medians of {args.runs}); a process that does not use "
          f"the runtime: open/close {other['open']:.3f}x, getppid {other['ppid']:.3f}x in the window "
          f"against out of it")
    with open(os.path.join(BUILD, "bench-daemon.json"), "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
