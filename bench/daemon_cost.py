#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""make bench-daemon: what the daemon's BPF costs per VFIO ioctl, by the
kernel's own count, against bpftrace doing the same counting, in one run.

On the syscall tracepoints (the fallback where vfio's handlers cannot be
hooked, as on this machine), with mock VFIO files below --vfio-path: a
regular file, whose ioctls all fail (the failing path), and
spyre-mock-vfio's FUSE file, whose ioctls succeed as a card's do (the
common path; each costs a trip to the FUSE server, so fewer a second).

- Per ioctl: daemons at several --sample-ioctls, a bpftrace script that
  counts the same (per command, errors, a log2 latency histogram) and the
  floor (bpftrace's empty programs on the same two tracepoints), each
  attached alone in turn, a round of each at a time: the kernel's run
  time of its ioctl programs over their runs, for 2 s of flat-out VFIO
  ioctls from bench/ioctl-load (C), medians of the rounds. The ratios
  to bpftrace and to the floor are what holds across machines. The same for
  an ioctl that is not VFIO's (every ioctl of the host runs the hook).
- Steady load: the default daemon alone, ioctl-load paced at each of
  --rates VFIO ioctls a second for --seconds, /metrics scraped every 15 s as
  Prometheus does: its BPF (kernel count) and its threads' CPU time, as a
  share of one core; and the same idle.
- The host-wide tax: a C loop of getppid() and of an ioctl that is not
  VFIO's (bench: spyre-syscall-loop), ns a call with the daemon and
  without, interleaved rounds, medians.

Usage: bench/daemon_cost.py [--rounds N] [--rates 1000,10000] [--seconds S] [--sample 1,8,16,32]
                            [--only ioctl|steady|tax]
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from kernel_count import bpf_stats, on_cpu_ns, programs, times_on_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SBT_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "spyre-bpftrace")
LOAD = os.path.join(BUILD, "bench", "ioctl-load")
LOOP = os.path.join(BUILD, "spyre-syscall-loop")
MOCK_VFIO = os.path.join(BUILD, "spyre-mock-vfio")
PORT = 19481

# bpftrace counting what the daemon counts: VFIO's numbers (_IO(';', n),
# the direction bits of x86), per command, failures, log2 latency
PEER = r"""
tracepoint:syscalls:sys_enter_ioctl /(args->cmd & 0xffff0000) == 0 && ((args->cmd >> 8) & 0xff) == 0x3b/ {
  @s[tid] = nsecs; @c[tid] = args->cmd;
}
tracepoint:syscalls:sys_exit_ioctl /@s[tid]/ {
  $c = @c[tid]; @n[$c] = count(); if (args->ret < 0) { @e[$c] = count(); }
  @lat[$c] = hist(nsecs - @s[tid]); delete(@s[tid]); delete(@c[tid]);
}
"""
FLOOR = "tracepoint:syscalls:sys_enter_ioctl { } tracepoint:syscalls:sys_exit_ioctl { }"


class Tracer:
    """A process that loads BPF programs: which programs are its (those
    that appeared when it started), its ioctl pair among them."""

    def __init__(self, name, argv, ready):
        before = self.before = set(programs())
        self.name = name
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline and not ready(self):
            if self.proc.poll() is not None:
                raise SystemExit(f"{name} exited: {self.proc.stderr.read()[-500:]}")
            time.sleep(0.2)
        time.sleep(0.5)
        progs = programs()
        mine = {i: p for i, p in progs.items() if i not in before}
        self.enter = [i for i, p in mine.items() if "enter_ioctl" in p.get("name", "") or p.get("name") == "ioctl_enter"]
        self.exit = [i for i, p in mine.items() if "exit_ioctl" in p.get("name", "") or p.get("name") == "ioctl_exit"]
        self.all = list(mine)
        if len(self.enter) != 1 or len(self.exit) != 1:
            self.stop()
            raise SystemExit(f"{name}: its ioctl programs not found among {[p.get('name') for p in mine.values()]}")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def counts(ids):
    """(run_time_ns, run_cnt) of each program id."""
    progs = programs()
    return {i: (progs[i].get("run_time_ns", 0), progs[i].get("run_cnt", 0)) for i in ids if i in progs}


def per_ioctl(t, a, b):
    """ns of t's ioctl programs (entry and return) per ioctl between a and b."""
    ns = sum(b[i][0] - a[i][0] for i in t.enter + t.exit)
    runs = b[t.enter[0]][1] - a[t.enter[0]][1]
    return ns / runs if runs else float("nan")


def daemon(tmp, sample, port, extra=()):
    """A daemon on the mock files: the slow trigger on (every ioctl looked
    at for it), the others off (the mock's ioctls all fail)."""
    d = os.path.join(tmp, f"d{sample}")
    os.makedirs(d, exist_ok=True)
    url = f"http://127.0.0.1:{port}/metrics"

    def up(_):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return True
        except OSError:
            return False
    return Tracer(f"daemon --sample-ioctls {sample}",
                  [TOOL, "daemon", "--listen", f"127.0.0.1:{port}", "--sample-ioctls", str(sample), "--no-sampling",
                   "--no-triggers", "--trigger-slow", "1s", "--no-kubelet", "--state-dir", os.path.join(d, "state"), "--runtime-dir",
                   os.path.join(d, "run"), "--vfio-path", os.path.join(tmp, "mock"), "--vfio-path",
                   os.path.join(tmp, "fuse"), *extra], up)


def bpftrace(tmp, name, script):
    path = os.path.join(tmp, name + ".bt")
    with open(path, "w") as f:
        f.write(script)
    return Tracer(f"bpftrace ({name})", ["bpftrace", path], lambda t: len(set(programs()) - t.before) >= 2)


def load(mock, rate, seconds):
    out = subprocess.run([LOAD, mock, str(rate), str(seconds)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def per_ioctl_rounds(tmp, mock, fused, starters, rounds):
    """Median ns per ioctl of each tracer, failing and succeeding VFIO
    ioctls and others: each attached alone, in turns, a round of each at a
    time."""
    vfio, ok, other = {}, {}, {}
    for r in range(rounds):
        for name, start in starters[r % len(starters):] + starters[:r % len(starters)]:
            t = start()
            try:
                ids = t.enter + t.exit
                a = counts(ids)
                load(mock, 10**8, 2)  # flat out
                b = counts(ids)
                subprocess.run([LOOP, "300000", "ioctl"], check=True, stdout=subprocess.DEVNULL)
                c = counts(ids)
                load(fused, 10**8, 2)
                d = counts(ids)
            finally:
                t.stop()
            vfio.setdefault(name, []).append(per_ioctl(t, a, b))
            other.setdefault(name, []).append(per_ioctl(t, b, c))
            ok.setdefault(name, []).append(per_ioctl(t, c, d))
    return tuple({k: statistics.median(v) for k, v in m.items()} for m in (vfio, ok, other))


def steady(tmp, mock, rates, seconds):
    """The default daemon alone: share of a core of its BPF and its threads,
    idle, then at each rate of VFIO ioctls a second, scraped every 15 s."""
    d = daemon(tmp, 16, PORT)
    res = {}
    try:
        time.sleep(10)  # its start (a look at every process's files) is not its steady state
        for what, r in [("idle", 0)] + [(f"{r}/s", r) for r in rates]:
            a, cpu0, w0, t0 = counts(d.all), on_cpu_ns(d.proc.pid), times_on_cpu(d.proc.pid), time.time()
            done = 0
            end = t0 + seconds
            while time.time() < end:
                step = min(15, end - time.time())
                if r:
                    done += load(mock, r, step)["ioctls"]
                else:
                    time.sleep(step)
                urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=5).read()
            wall = time.time() - t0
            b, cpu1, w1 = counts(d.all), on_cpu_ns(d.proc.pid), times_on_cpu(d.proc.pid)
            bpf_ns = sum(b[i][0] - a[i][0] for i in b if i in a)
            res[what] = {"ioctls_per_s": done / wall, "bpf_core_pct": 100 * bpf_ns / 1e9 / wall,
                         "user_core_pct": 100 * (cpu1 - cpu0) / 1e9 / wall, "wakes_per_s": (w1 - w0) / wall}
    finally:
        d.stop()
    return res


def host_tax(tmp, rounds):
    """ns a call of getppid() and of a non-VFIO ioctl, without and with
    the daemon, interleaved."""
    res = {k: [] for k in ("getppid", "getppid_daemon", "ioctl", "ioctl_daemon")}
    for _ in range(rounds):
        for with_daemon in (False, True):
            d = daemon(tmp, 16, PORT) if with_daemon else None
            try:
                sfx = "_daemon" if with_daemon else ""
                res["getppid" + sfx].append(float(subprocess.run([LOOP, "2000000"], capture_output=True,
                                                                 text=True, check=True).stdout))
                res["ioctl" + sfx].append(float(subprocess.run([LOOP, "2000000", "ioctl"], capture_output=True,
                                                               text=True, check=True).stdout))
            finally:
                if d:
                    d.stop()
    return {k: statistics.median(v) for k, v in res.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rates", default="1000,10000", help="paced VFIO ioctls a second, steady phase")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--sample", default="1,8,16,32", help="--sample-ioctls of the daemons compared")
    ap.add_argument("--only", choices=("ioctl", "steady", "tax"))
    args = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("bpftrace") or not shutil.which("bpftool"):
        print("bench-daemon: needs root, bpftrace and bpftool")
        return 1
    # SIGTERM and SIGHUP end the bench through its finally blocks: the
    # statistics sysctl back as it was, the tracers stopped
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(1))
    tmp = tempfile.mkdtemp(prefix="sbt-dcost-")
    mock = os.path.join(tmp, "mock", "vfio")
    os.makedirs(os.path.dirname(mock))
    open(mock, "w").close()
    fuse_dir = os.path.join(tmp, "fuse")
    os.makedirs(fuse_dir)
    fuse = subprocess.Popen([MOCK_VFIO, fuse_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    fused = os.path.join(fuse_dir, "vfio")
    deadline = time.time() + 10
    while not os.path.exists(fused) and time.time() < deadline:
        time.sleep(0.1)
    print(f"bench-daemon: {time.strftime('%Y-%m-%d')}, {os.uname().release}, {os.cpu_count()} CPUs; "
          "kernel count of BPF run time (kernel.bpf_stats_enabled on for the bench)")
    try:
        with bpf_stats():
            if args.only in (None, "ioctl"):
                samples = [int(s) for s in args.sample.split(",")]
                starters = [(f"daemon --sample-ioctls {n}", lambda n=n: daemon(tmp, n, PORT + 1))
                            for n in samples]
                starters += [("bpftrace (peer)", lambda: bpftrace(tmp, "peer", PEER)),
                             ("bpftrace (floor)", lambda: bpftrace(tmp, "floor", FLOOR))]
                vfio, ok, other = per_ioctl_rounds(tmp, mock, fused, starters, args.rounds)
                print(f"  ns per ioctl, medians of {args.rounds} rounds, each attached alone, in turns:")
                for what, res in (("VFIO, failing (a regular mock file)", vfio),
                                  ("VFIO, succeeding (spyre-mock-vfio's FUSE file)", ok),
                                  ("not VFIO's (FIONREAD on /dev/null)", other)):
                    peer, floor = res["bpftrace (peer)"], res["bpftrace (floor)"]
                    print(f"   {what}:")
                    for name, ns in res.items():
                        print(f"    {name:30} {ns:7.1f} ns  {ns / peer:5.2f}x bpftrace  {ns / floor:5.2f}x the floor")
            if args.only in (None, "steady"):
                s = steady(tmp, mock, [int(r) for r in args.rates.split(",")], args.seconds)
                for what, r in s.items():
                    print(f"  daemon (--sample-ioctls 16) {what:7}: {r['ioctls_per_s']:8.0f} VFIO ioctls/s, BPF "
                          f"{r['bpf_core_pct']:.3f}% of a core, its threads {r['user_core_pct']:.3f}% "
                          f"({r['wakes_per_s']:.1f} wakes/s; {args.seconds:.0f} s, scraped every 15 s)")
        if args.only in (None, "tax"):
            t = host_tax(tmp, max(3, args.rounds // 2))
            print(f"  host-wide tax (C loop, ns a call, medians): getppid {t['getppid']:.1f} -> "
                  f"{t['getppid_daemon']:.1f} with the daemon; a non-VFIO ioctl {t['ioctl']:.1f} -> "
                  f"{t['ioctl_daemon']:.1f}")
    finally:
        subprocess.run(["fusermount3", "-u", fuse_dir], stderr=subprocess.DEVNULL)
        fuse.kill()
        fuse.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
