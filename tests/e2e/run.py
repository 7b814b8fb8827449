#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Host end-to-end tests: trace the Spyre simulator on this machine's kernel
and hold the capture against what the simulator says it did.

Needs root (BPF, uprobes); without it every test skips with the reason.
Prints one line per test and a closing 'e2e: N passed, N failed, N skipped'.
"""
import fcntl
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# make's OUT: `make e2e` passes it; by hand the tests use build/
BUILD = os.environ.get("SBT_BUILD", os.path.join(ROOT, "build"))
TOOL = os.path.join(BUILD, "spyre-bpftrace")
SIM = os.path.join(BUILD, "spyre-sim-run")
# the uprobe_multi links' programs (bpftool names them from BTF, whole)
MULTI_PROGS = {"call_enter_multi", "call_return_multi"}
OUR_PROGS = MULTI_PROGS | {"call_enter", "call_return", "ioctl_enter", "ioctl_exit", "openat_enter",
             "openat_exit", "close_enter", "irq_entry", "irq_exit", "iommu_map",
             "iommu_unmap", "dma_map", "dma_unmap", "fork_btf", "fork_raw",
             "task_exit", "task_rename"}

LINE = re.compile(r"^(.*?) +(\d+)/(\d+) +\[(\d+)\] (\d+)\.(\d+): (\w+)(.*)$")


class Skip(Exception):
    pass


CHECKED = set()


def parse_dump(path, outputs=True):
    """The capture as a list of dicts, through `spyre-bpftrace dump`; the
    first time, its Perfetto and JSON conversions are checked too."""
    if outputs and path not in CHECKED and path.endswith(".sbt"):
        CHECKED.add(path)
        check_trace_outputs(path)
    out = subprocess.run([TOOL, "dump", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"dump failed ({out.returncode}): {out.stderr.strip()}")
    events = []
    for line in out.stdout.splitlines():
        m = LINE.match(line)
        assert m, f"unparsable dump line: {line!r}"
        ev = {"comm": m.group(1).strip(), "tgid": int(m.group(2)), "tid": int(m.group(3)),
              "cpu": int(m.group(4)), "ts": int(m.group(5)) * 10**9 + int(m.group(6)),
              "type": m.group(7)}
        for kv in shlex.split(m.group(8)):
            k, _, v = kv.partition("=")
            ev[k] = v
        events.append(ev)
    return events, out.stderr


def num(v):
    return int(v, 0)


PROTO = os.path.join(ROOT, "tests", "e2e", "perfetto_subset.proto")


def check_trace_outputs(cap):
    """Every capture converts to a Perfetto trace that passes inspect and
    decodes with protoc (no field of the wrong type), and to Chrome JSON that
    a real JSON parser reads. Returns the parsed JSON."""
    base = cap[:-len(".sbt")]
    for ext in ("pftrace", "json"):
        r = subprocess.run([TOOL, "convert", cap, "-o", f"{base}.{ext}"], capture_output=True, text=True)
        assert r.returncode == 0, f"convert to .{ext} failed: {r.stderr}"
    r = subprocess.run([TOOL, "inspect", f"{base}.pftrace"], capture_output=True, text=True)
    assert r.returncode == 0, f"inspect found violations:\n{r.stdout}"
    assert "ok: framing" in r.stdout
    if shutil.which("protoc"):
        with open(f"{base}.pftrace", "rb") as f:
            d = subprocess.run(["protoc", f"--proto_path={os.path.dirname(PROTO)}",
                                "--decode=perfetto.protos.Trace", os.path.basename(PROTO)],
                               stdin=f, capture_output=True, text=True)
        assert d.returncode == 0, f"protoc cannot decode the trace: {d.stderr}"
        unknown = [ln for ln in d.stdout.splitlines() if re.match(r"^\s*\d+:", ln)]
        assert not unknown, f"fields protoc does not know (wrong wire type?): {unknown[:3]}"
    with open(f"{base}.json", encoding="utf-8") as f:
        trace = json.load(f)
    check_aiu_rules(trace)
    return trace


AIU_PHASES = {"X", "B", "E", "i", "C", "M", "s", "f"}


def check_meta_names(trace):
    """Perfetto's JSON importer refuses a process or thread name event whose
    name is empty or missing (json_parser_failure): none in any JSON the
    tests write."""
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            name = e.get("args", {}).get("name")
            assert isinstance(name, str) and name, f"name event without a name: {e}"


def check_aiu_rules(trace):
    """What IBM's aiu-trace-analyzer needs to read a Chrome JSON trace in its
    TORCH dialect (../shared/reference/aiu-trace-analyzer.md), held against
    every JSON the e2e tests write."""
    # read as PyTorch's only with deviceProperties, and it stops on a list
    # of any length but one (a file per card): the first card, all in devices
    devices = trace["otherData"]["devices"]
    props = trace.get("deviceProperties")
    assert isinstance(props, list) and len(props) == 1, f"deviceProperties {props} stops aiu-trace-analyzer"
    assert props[0] == (devices[0] if devices else {"id": 0, "name": "", "pciAddress": "", "vendorDevice": ""})
    assert trace.get("schemaVersion") == 1
    assert trace["otherData"]["clock_snapshots"], "no clock snapshot to align the file with"
    check_meta_names(trace)
    streams = {}
    for e in trace["traceEvents"]:
        assert "ts" in e, f"event without ts: {e}"
        assert e["ph"] in AIU_PHASES, f"phase {e['ph']} stops aiu-trace-analyzer: {e}"
        if e["ph"] == "f":
            assert e.get("bp") == "e", f"flow end without bp e: {e}"
        if e.get("cat") == "gpu_memcpy" and e["ph"] == "X":
            assert re.fullmatch(r"[Mm]emcpy \((HtoD|DtoH)\)", e["name"]), f"copy named {e['name']}"
        if e["ph"] == "X" and e.get("name") == "Compute":
            assert e["cat"] == "kernel", e
        if "correlation" in e.get("args", {}):
            assert isinstance(e["args"]["correlation"], int), e
        if e["ph"] == "X":
            streams.setdefault((e["pid"], e["tid"]), []).append(
                (round(float(e["ts"]), 4), round(float(e["ts"]) + float(e["dur"]), 4), e["name"]))
    runtime = [e for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "cuda_runtime"]
    assert all("::" in e["name"] for e in runtime), "runtime calls without their demangled names"
    # its overlap pass: each (pid, tid) one stream; a slice that does not nest
    for key, spans in streams.items():
        spans.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for start, end, name in spans:
            while stack and stack[-1][1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1][1], \
                f"{key}: {name} [{start}, {end}] partly overlaps {stack[-1][2]} {stack[-1][:2]}"
            stack.append((start, end, name))


def sim_cmd(tmp, *args):
    return [SIM, "--mock-dir", os.path.join(tmp, "mock"), "--json",
            os.path.join(tmp, "sim.json"), *args]


def tracer(tmp, *args, out="cap.sbt"):
    return [TOOL, "-q", "-o", os.path.join(tmp, out), "--vfio-path",
            os.path.join(tmp, "mock") + "/*", *args]


def check_ioctls_match_sim(ioctls, sim):
    """Every ioctl the simulator made, per thread in order, with its decoded
    arguments and result (type1's and sPAPR's)."""
    got_io, want_io = {}, {}
    for e in ioctls:
        got_io.setdefault(e["tid"], []).append(e)
    for s in sim["ioctls"]:
        want_io.setdefault(s["tid"], []).append(s)
    assert set(got_io) == set(want_io), f"ioctl threads differ: {sorted(got_io)} vs {sorted(want_io)}"
    for tid, wl in want_io.items():
        gl = got_io[tid]
        assert len(gl) == len(wl), f"tid {tid}: {len(gl)} ioctls traced, sim made {len(wl)}"
        for g, w in zip(gl, wl):
            assert g["cmd"] == w["cmd"], f"tid {tid}: cmd {g['cmd']} vs {w['cmd']}"
            assert int(g["fd"]) == w["fd"], f"{w['cmd']}: fd {g['fd']} vs {w['fd']}"
            want_ret = -w["errno"] if w["ret"] < 0 else w["ret"]
            assert int(g["ret"]) == want_ret, f"{w['cmd']}: ret {g['ret']} vs {want_ret}"
            if w["cmd"] in ("VFIO_IOMMU_MAP_DMA", "VFIO_IOMMU_UNMAP_DMA"):
                assert num(g["iova"]) == w["iova"], f"{w['cmd']}: iova {g['iova']} vs {w['iova']:#x}"
                assert int(g["size"]) == w["size"], f"{w['cmd']}: size {g['size']} vs {w['size']}"
                assert num(g["flags"]) == w["flags"]
            if w["cmd"] in ("VFIO_IOMMU_MAP_DMA", "VFIO_IOMMU_SPAPR_REGISTER_MEMORY",
                            "VFIO_IOMMU_SPAPR_UNREGISTER_MEMORY"):
                assert num(g["vaddr"]) == w["vaddr"], f"{w['cmd']} vaddr {g['vaddr']} vs {w['vaddr']:#x}"
            if w["cmd"].startswith("VFIO_IOMMU_SPAPR_") and w["cmd"].endswith("REGISTER_MEMORY"):
                assert int(g["size"]) == w["size"], f"{w['cmd']}: size {g['size']} vs {w['size']}"
            if w["cmd"] == "VFIO_DEVICE_SET_IRQS":
                for k, sk in (("irq_index", "index"), ("start", "start"), ("count", "count")):
                    assert int(g[k]) == w[sk], f"SET_IRQS {k} {g[k]} vs {w[sk]}"


def check_calls_match_sim(calls, sim, partial=False, skipped=()):
    """Per thread, the calls the simulator logged in the same order, with
    the same byte counts; partial: some may be missing (the probes went on,
    one library after another, while it ran), none invented, the order
    kept."""
    got, want = {}, {}
    for e in calls:
        if e["type"] == "call_enter":
            got.setdefault(e["tid"], []).append((e["name"], num(e["bytes"]) if "bytes" in e else None))
    for tid, name, nbytes in sim["call_log"]:
        want.setdefault(tid, []).append((name, nbytes))
    assert set(got) <= set(want) if partial else set(got) == set(want), \
        f"threads differ: traced {sorted(got)} sim {sorted(want)}"
    for tid in got:
        g, w = got[tid], want[tid]
        if partial:  # each traced call matched to the next logged one of its name
            it = iter(w)
            for call in g:
                assert any(call[0] == x[0] and call[1] in (None, x[1]) for x in it), \
                    f"tid {tid}: {call} not in the logged calls, in order"
            continue
        # a call whose entry the kernel skipped (skipped_entries) is left
        # out of the simulator's list where the traced one goes on without it
        left = [e["name"] for e in skipped if e["tid"] == tid]
        i = 0
        while i < len(w) and left:
            if (i >= len(g) or g[i][0] != w[i][0]) and w[i][0] in left:
                left.remove(w[i][0])
                w = w[:i] + w[i + 1:]
                continue
            i += 1
        assert not left, f"tid {tid}: returns without entry of {left} match no call left out"
        assert [n for n, _ in g] == [n for n, _ in w], \
            f"tid {tid}: call order differs\n traced {[n for n, _ in g][:12]}\n sim    {[n for n, _ in w][:12]}"
        for (n, gb), (_, wb) in zip(g, w):
            if gb is not None:  # the probe has a byte-count argument
                assert gb == wb, f"tid {tid}: {n} bytes traced {gb} sim {wb}"


# On the 6.18 host of 2026-12-05 the kernel now and then (5 runs in 160
# of a two-thread simulator) does not run a process's uprobe on a
# function's entry, just after another thread of the process exited: the
# BPF program's own run count is one short of the calls, while a
# system-wide bpftrace probe on the same function saw the call. The return
# is still seen, and the tracer reports it as a return without entry. A
# capture may hold one such return; more fail.
SKIPPED_ENTRIES_ALLOWED = 1


def skipped_entries(events, pid):
    skipped = [e for e in events if e["type"] == "call_exit" and e["tgid"] == pid and "unpaired" in e]
    assert len(skipped) <= SKIPPED_ENTRIES_ALLOWED, \
        f"{len(skipped)} returns without entry: {[(e['tid'], e['name']) for e in skipped]}"
    for e in skipped:
        print(f"     note: the kernel skipped the entry probe of {e['name']} once (tid {e['tid']}); "
              "the tracer saw its return and reported it unpaired")
    return skipped


def check_calls_from_a_moment(events, sim):
    """Probes that went on while the process ran: each function's at one
    moment, so per thread and function the calls captured are the last ones
    it made, with their byte counts. A call is seen by its entry, or by its
    return alone (in flight at that moment, or its entry skipped: see
    SKIPPED_ENTRIES_ALLOWED). Returns how many calls were seen."""
    got, want = {}, {}
    for e in sorted((e for e in events if e["tgid"] == sim["pid"]), key=lambda e: e["ts"]):
        if e["type"] == "call_enter":
            got.setdefault((e["tid"], e["name"]), []).append(num(e["bytes"]) if "bytes" in e else None)
        elif e["type"] == "call_exit" and "unpaired" in e:
            got.setdefault((e["tid"], e["name"]), []).append(None)
    for tid, name, nbytes in sim["call_log"]:
        want.setdefault((tid, name), []).append(nbytes)
    for key, calls in got.items():
        assert key in want and len(calls) <= len(want[key]), f"{key}: more calls captured than made"
        tail = want[key][len(want[key]) - len(calls):]
        assert [w if g is not None else None for g, w in zip(calls, tail)] == calls, \
            f"{key}: the captured calls are not the last ones made"
    return sum(map(len, got.values()))


def check_whole_run(events, sim):
    """The simulator did its work and logged it all; the capture ended once
    and lost nothing."""
    assert not sim["failed"], "the simulator workload itself failed"
    assert sim["call_log_complete"], "simulator call log overflowed"
    ends = [e for e in events if e["type"] == "end"]
    assert len(ends) == 1, f"expected one end record, got {len(ends)}"
    assert num(ends[0]["lost"]) == 0, f"lost records: {ends[0]['lost']}"
    assert not [e for e in events if e["type"] == "lost"], "lost-record marks in capture"


def check_capture_matches_sim(events, sim):
    """The heart of the tests: the capture holds exactly what the simulator did."""
    check_whole_run(events, sim)

    pid = sim["pid"]
    calls = [e for e in events if e["type"] in ("call_enter", "call_exit") and e["tgid"] == pid]
    ioctls = [e for e in events if e["type"] == "ioctl" and e["tgid"] == pid]
    skipped = skipped_entries(events, pid)

    # 1. per thread, the same calls in the same order, with the same byte counts
    check_calls_match_sim(calls, sim, skipped=skipped)

    # 2. every ioctl, per thread in order, with its decoded arguments and result
    check_ioctls_match_sim(ioctls, sim)

    # 3. nesting: calls pair up LIFO per thread; each ioctl sits inside the call
    #    that made it, on the same thread
    expect_parent = {"VFIO_IOMMU_MAP_DMA": "senlib::PfIommuMapper::Map",
                     "VFIO_IOMMU_UNMAP_DMA": "senlib::PfIommuMapper::Unmap"}
    by_tid = {}
    for e in calls + ioctls:
        by_tid.setdefault(e["tid"], []).append(e)
    for tid, evs in by_tid.items():
        evs.sort(key=lambda e: (e["ts"] - int(e.get("dur_ns", 0)) if e["type"] == "ioctl" else e["ts"]))
        stack = []
        for i, e in enumerate(evs):
            if e["type"] == "call_enter":
                assert int(e["depth"]) == len(stack), f"tid {tid}: depth {e['depth']} with {len(stack)} open"
                stack.append(e)
            elif e["type"] == "call_exit":
                if e in skipped:
                    continue  # its entry was never pushed
                assert stack, f"tid {tid}: return from {e['name']} with nothing open"
                top = stack.pop()
                assert top["name"] == e["name"], f"tid {tid}: {e['name']} returned while {top['name']} open"
                assert "unpaired" not in e, f"tid {tid}: unpaired return of {e['name']}"
                assert int(e["dur_ns"]) == e["ts"] - top["ts"], "exit duration disagrees with entry time"
            else:
                parent = stack[-1]["name"] if stack else None
                after = evs[i + 1] if i + 1 < len(evs) else None
                if after in skipped:  # made by the call whose entry was skipped
                    parent = after["name"]
                if e["cmd"] in expect_parent:
                    assert parent == expect_parent[e["cmd"]], \
                        f"tid {tid}: {e['cmd']} inside {parent}, expected {expect_parent[e['cmd']]}"
                start, end = e["ts"] - int(e["dur_ns"]), e["ts"]
                for open_call in stack:
                    assert open_call["ts"] <= start, "ioctl started before its enclosing call"
        assert not stack, f"tid {tid}: calls never returned: {[s['name'] for s in stack]}"


def run_c_multithread(tmp):
    cmd = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--threads", "3", "--jobs", "6",
                                                       "--bytes", "65536", "--seed", "7"))
    r = subprocess.run(tracer(tmp, "-c", cmd), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"tracer exit {r.returncode}: {r.stderr}"
    events, _ = parse_dump(os.path.join(tmp, "cap.sbt"))
    sim = json.load(open(os.path.join(tmp, "sim.json")))
    check_capture_matches_sim(events, sim)
    threads = {e["tid"] for e in events if e["type"] == "task_new" and e["tgid"] == sim["pid"]}
    # two more workers and the mock device's thread
    assert len(threads) == 3, f"expected 3 new threads, saw {len(threads)}"
    procs = [e for e in events if e["type"] == "process"]
    assert procs and procs[0]["pid"] == str(sim["pid"]) and "spyre-sim-run" in procs[0]["cmdline"]
    # the timeline: one device job per launch the simulator made, per engine,
    # with the bytes it copied, each linked launch -> job -> synchronize
    trace = json.load(open(os.path.join(tmp, "cap.json")))["traceEvents"]
    jobs = [e for e in trace if e["ph"] == "X" and e["name"] in ("Memcpy (HtoD)", "Memcpy (DtoH)", "Compute")]
    for name, key in (("Memcpy (HtoD)", "h2d"), ("Compute", "compute"), ("Memcpy (DtoH)", "d2h")):
        got = sum(1 for e in jobs if e["name"] == name)
        assert got == sim["jobs_done"][key], f"{got} {name} jobs in the trace, simulator ran {sim['jobs_done'][key]}"
    h2d_bytes = sorted(e["args"]["bytes"] for e in jobs if e["name"] == "Memcpy (HtoD)")
    sim_h2d = sorted(b for _, n, b in sim["call_log"] if n == "flex::RuntimeStream::launchH2D")
    assert h2d_bytes == sim_h2d, "H2D job bytes differ from the simulator's copies"
    # launch -> job (kineto's ac2g, id = correlation), job -> wait
    flows = {}
    for e in trace:
        if e["ph"] in ("s", "t", "f"):
            flows.setdefault((e["cat"], e["id"]), []).append((e["ph"], e["ts"]))
    by_corr = {e["args"]["correlation"]: e for e in jobs}
    assert len(flows) == 2 * len(jobs), f"{len(flows)} flows for {len(jobs)} jobs"
    for (cat, fid), ends in flows.items():
        assert [ph for ph, _ in ends] == ["s", "f"], f"flow {cat} {fid}: {ends}"
        job = by_corr[fid if cat == "ac2g" else fid - (1 << 40)]
        # the job is where the first leg ends and the second begins
        assert ends[1 if cat == "ac2g" else 0][1] == job["ts"], f"flow {cat} {fid} misses its job"
    # jobs on one lane never partly overlap (inspect checks the same on the .pftrace)
    lanes = {}
    for e in jobs:
        lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for iv in lanes.values():
        iv.sort()
        for (a0, a1), (b0, b1) in zip(iv, iv[1:]):
            assert b0 >= a1 - 1e-3, "two jobs on one lane overlap"


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def capture_has_probes(path):
    """The tracer flushes its header once attached: probes are in place."""
    try:
        evs, _ = parse_dump(path, outputs=False)
    except AssertionError:
        return False
    return any(e["type"] == "probe" for e in evs)


def kill_session(proc):
    """End a tracer started in its own session, and the command it started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_p_attach(tmp):
    sim = subprocess.Popen(sim_cmd(tmp, "--threads", "2", "--jobs", "5", "--wait-stdin"),
                           stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    cap = os.path.join(tmp, "cap.sbt")
    tr = subprocess.Popen(tracer(tmp, "-p", str(sim.pid)), stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: os.path.exists(cap) and capture_has_probes(cap), 20, "the tracer to attach")
        sim.stdin.write(b"g")
        sim.stdin.close()
        assert sim.wait(timeout=60) == 0
        _, err = tr.communicate(timeout=30)
        assert tr.returncode == 0, f"tracer exit {tr.returncode}: {err}"
    finally:
        for p in (sim, tr):
            if p.poll() is None:
                p.kill()
    events, _ = parse_dump(cap)
    check_capture_matches_sim(events, json.load(open(os.path.join(tmp, "sim.json"))))


def long_sim(tmp):
    return " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "1000000", "--delay-us", "2000"))


def end_record(path):
    events, err = parse_dump(path)
    ends = [e for e in events if e["type"] == "end"]
    return events, ends, err


def run_duration(tmp):
    t0 = time.time()
    r = subprocess.run(tracer(tmp, "-d", "1", "-c", long_sim(tmp)), capture_output=True,
                       text=True, timeout=30)
    took = time.time() - t0
    assert r.returncode == 0, f"tracer exit {r.returncode}: {r.stderr}"
    assert took < 10, f"-d 1 took {took:.1f} s"
    events, ends, _ = end_record(os.path.join(tmp, "cap.sbt"))
    assert len(ends) == 1, "no end record after -d"
    dur = int(ends[0]["duration_ns"]) / 1e9
    assert 0.9 <= dur <= 5, f"capture lasted {dur:.2f} s for -d 1"
    assert any(e["type"] == "call_enter" for e in events), "no calls captured in 1 s"


def run_duration_while_attaching(tmp):
    """-d shorter than attaching takes: the tracer stops at the deadline, not
    after every probe; the command, never started, does not run untraced."""
    t0 = time.time()
    r = subprocess.run([a for a in tracer(tmp, "-d", "0.001", "--probe", "libsenlib.so:*", "-c",
                                          long_sim(tmp)) if a != "-q"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"tracer exit {r.returncode}: {r.stderr}"
    assert time.time() - t0 < 10
    assert "duration elapsed while attaching" in r.stderr, r.stderr
    _, ends, _ = end_record(os.path.join(tmp, "cap.sbt"))
    assert len(ends) == 1, "no end record"
    assert not os.path.exists(os.path.join(tmp, "sim.json")), "the command ran"


def run_sigint(tmp):
    cap = os.path.join(tmp, "cap.sbt")
    tr = subprocess.Popen(tracer(tmp, "-c", long_sim(tmp)), stderr=subprocess.PIPE, text=True,
                          start_new_session=True)
    try:
        wait_for(lambda: os.path.exists(cap) and capture_has_probes(cap), 20, "attach")
        time.sleep(0.5)
        tr.send_signal(signal.SIGINT)  # the tracer only, not its command
        _, err = tr.communicate(timeout=20)
    finally:
        kill_session(tr)
    assert tr.returncode == 0, f"tracer exit {tr.returncode} after SIGINT: {err}"
    events, ends, _ = end_record(cap)
    assert len(ends) == 1, "no end record after SIGINT"
    assert any(e["type"] == "call_exit" for e in events), "nothing captured before SIGINT"


def our_bpf_objects():
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "list"], capture_output=True,
                                      text=True, check=True).stdout or "[]")
    ids = {p["id"] for p in progs if p.get("name") in OUR_PROGS}
    links = json.loads(subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True,
                                      text=True, check=True).stdout or "[]")
    ours = [link for link in links if link.get("prog_id") in ids]
    perf = json.loads(subprocess.run(["bpftool", "-j", "perf", "list"], capture_output=True,
                                     text=True).stdout or "[]")
    # uprobes: a perf event a site, or uprobe_multi links (a library's sites on a process)
    multi = {p["id"] for p in progs if p.get("name") in MULTI_PROGS}
    uprobes = [p for p in perf if p.get("prog_id") in ids] + \
        [dict(link, fd_type="uprobe_multi") for link in ours if link.get("prog_id") in multi]
    return ids, ours, uprobes


def run_sigint_command_ignores_term(tmp):
    """Ctrl-C ends the recording even when the -c command ignores SIGTERM:
    the trace is written, the command gets SIGKILL 5 s later, and the
    tracer says so."""
    cap = os.path.join(tmp, "cap.sbt")
    cmd = "sh -c " + shlex.quote("trap '' TERM; exec " + long_sim(tmp))
    tr = subprocess.Popen([a for a in tracer(tmp, "-c", cmd) if a != "-q"], stderr=subprocess.PIPE,
                          text=True, start_new_session=True)
    try:
        wait_for(lambda: os.path.exists(cap) and capture_has_probes(cap), 20, "attach")
        time.sleep(0.5)
        t0 = time.time()
        tr.send_signal(signal.SIGINT)
        _, err = tr.communicate(timeout=30)
        took = time.time() - t0
    finally:
        kill_session(tr)
    assert tr.returncode == 0, f"tracer exit {tr.returncode} after SIGINT: {err}"
    assert "did not end 5 s after SIGTERM: killed" in err, err
    assert 4.5 <= took < 20, f"the tracer ended {took:.1f} s after SIGINT"
    events, ends, _ = end_record(cap)
    assert len(ends) == 1, "no end record after SIGINT"
    assert any(e["type"] == "call_exit" for e in events), "nothing captured before SIGINT"


def run_static_command_runs_once(tmp):
    """-c with a static program: its libraries are listed by its own
    dynamic loader, of which it has none, so nothing runs before the
    tracer starts it, traced, once (LD_TRACE_LOADED_OBJECTS on the program
    itself ran a static one for real, untraced, and waited for it)."""
    busybox = shutil.which("busybox")
    if not busybox:
        raise Skip("busybox missing (make deps installs busybox-static)")
    mark = os.path.join(tmp, "mark")
    t0 = time.time()
    r = subprocess.run(tracer(tmp, "-d", "2", "-c", f"{busybox} sh -c 'echo $$ >> {mark}; sleep 60'"),
                       capture_output=True, text=True, timeout=90)
    took = time.time() - t0
    assert r.returncode == 0, f"tracer exit {r.returncode}: {r.stderr}"
    runs = open(mark).read().split() if os.path.exists(mark) else []
    events, ends, _ = end_record(os.path.join(tmp, "cap.sbt"))
    traced = [e["pid"] for e in events if e["type"] == "process" and "busybox" in e.get("cmdline", "")]
    assert runs == traced and len(runs) == 1, f"the command ran as {runs}; traced as {traced}"
    assert took < 30, f"-d 2 took {took:.1f} s: something waited for the command"


def run_sigkill_cleanup(tmp):
    # the kernel frees programs of earlier tests asynchronously
    wait_for(lambda: not our_bpf_objects()[0], 10, "programs of earlier runs to go away")
    cap = os.path.join(tmp, "cap.sbt")
    tr = subprocess.Popen(tracer(tmp, "-c", long_sim(tmp)), stderr=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        wait_for(lambda: os.path.exists(cap) and capture_has_probes(cap), 20, "attach")
        time.sleep(0.5)
        progs, links, uprobes = our_bpf_objects()
        assert progs and links and uprobes, "tracer running but no programs/links/uprobes seen"
        os.kill(tr.pid, signal.SIGKILL)
        tr.wait(timeout=10)
    finally:
        kill_session(tr)  # the -c command dies with the tracer (signals test); be sure
    wait_for(lambda: our_bpf_objects() == (set(), [], []), 10,
             "our BPF programs, links and uprobes to go away")
    # a capture cut by a crash still reads back up to its last whole record
    events, _ = parse_dump(cap)
    assert any(e["type"] == "probe" for e in events), "killed capture lost its header"
    # records are drained every 100 ms, so calls made before the kill are there
    assert any(e["type"] == "call_exit" for e in events), "killed capture holds no calls"


def run_error(args, want_rc, want_msg, env_prefix=()):
    r = subprocess.run([*env_prefix, TOOL, *args], capture_output=True, text=True, timeout=60)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == want_rc, f"{args}: exit {r.returncode}, wanted {want_rc}: {r.stderr}"
    assert any(want_msg in ln for ln in lines), f"{args}: no '{want_msg}' in: {r.stderr}"
    return r


def run_errors(tmp):
    out = os.path.join(tmp, "e.sbt")
    run_error(["-p", "abc"], 2, "invalid PID 'abc'")
    run_error([], 2, "nothing to trace")
    run_error(["-p", "1", "-c", "true"], 2, "do not go together")
    run_error(["-p", "1", "--vfio-path", "/a/*/b*"], 2, "at most one '*'")
    run_error(["-p", "1", "--probe", "nocolon"], 2, "expected LIB:PATTERN")
    run_error(["-p", "1", "--buffer-size", "12Q"], 2, "invalid --buffer-size")
    run_error(["-p", "1", "--device", "1014"], 2, "invalid --device '1014'")
    run_error(["-p", "1", "--device", "0000:00:20.0"], 2, "invalid --device")  # device 0x20 > 31
    run_error(["-p", "1", "--device", "all", "--device", "1014:06a7"], 2, "do not go together")
    run_error(["-p", "1", "--driver-probes", "ebpf"], 2, "unknown --driver-probes 'ebpf'")
    run_error(["-p", "4194303", "-o", out], 1, "no such process: 4194303")
    run_error(["-p", "1", "-o", "/nonexistent/dir/x.sbt"], 1, "cannot write '/nonexistent/dir/x.sbt'")
    run_error(["bogus"], 2, "unknown command 'bogus'")
    if shutil.which("setpriv"):
        run_error(["-p", "1", "-o", out], 1, "not permitted to load BPF programs",
                  env_prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              "--inh-caps=-all", "--bounding-set=-all"))
    # a process with no runtime library: clear error, and an existing output
    # stays as it was (the run never started)
    with open(out, "w") as f:
        f.write("keep me")
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        run_error(["-p", str(sleeper.pid), "-o", out], 1, "no Spyre runtime library in the maps")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert open(out).read() == "keep me", "a failed run wiped the existing output"
    assert not [f for f in os.listdir(tmp) if f.startswith(".e.sbt.")], "temporary file left"
    run_error(["-p", "2", "-o", out], 1, "PID 2 is a kernel thread")
    run_error(["-d", "1e300", "-p", "1"], 2, "invalid duration '1e300'")
    run_error(["-d", "18446744074", "-p", "1"], 2, "invalid duration")
    run_error(["--no-such-flag", "-p", "1"], 2, "unrecognized option")
    # a command that is not there: the tracer says so, no trace of ours left
    run_error(["-o", out, "-c", "/nonexistent/cmd"], 1, "cannot run '/nonexistent/cmd'")
    run_error(["dump", os.path.join(tmp, "missing.sbt")], 1, "cannot read")


def run_output_files_safe(tmp):
    """Outputs are never written through a symlink, are 0600 whatever the
    umask, and a convert of a missing input leaves the output as it was.
    A device or a FIFO as the output is refused, not replaced (a trace is
    renamed over its path: /dev/null became a regular file once)."""
    fifo = os.path.join(tmp, "fifo.sbt")
    os.mkfifo(fifo)
    for target in ("/dev/null", fifo):
        r = subprocess.run([TOOL, "-q", "-o", target, "--format", "sbt", "-c", "true"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode != 0 and "not a regular file" in r.stderr, r.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISFIFO(os.stat(fifo).st_mode)
    victim = os.path.join(tmp, "victim.txt")
    with open(victim, "w") as f:
        f.write("victim")
    cap = os.path.join(tmp, "cap.sbt")
    os.symlink(victim, cap)
    cmd = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "1"))
    old = os.umask(0o022)
    try:
        r = subprocess.run(tracer(tmp, "-c", cmd), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        pf = os.path.join(tmp, "out.pftrace")
        r = subprocess.run([TOOL, "convert", cap, "-o", pf], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    finally:
        os.umask(old)
    assert open(victim).read() == "victim", "wrote through the symlink"
    for path in (cap, pf):
        st = os.lstat(path)
        assert not os.path.islink(path) and (st.st_mode & 0o777) == 0o600, \
            f"{path}: mode {st.st_mode & 0o777:o}, want 600, a regular file"
    with open(pf, "rb") as f:
        before = f.read()
    r = subprocess.run([TOOL, "convert", os.path.join(tmp, "typo.sbt"), "-o", pf],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "cannot read" in r.stderr, r
    assert "Perfetto trace" not in r.stderr, "a success line after the error"
    assert open(pf, "rb").read() == before, "a failed convert changed the existing output"


def run_inspect_rejects_non_traces(tmp):
    empty = os.path.join(tmp, "empty.pftrace")
    open(empty, "w").close()
    for path in (empty, "/dev/null", "/dev/zero", "/proc/self/maps"):
        r = subprocess.run([TOOL, "inspect", path], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, f"inspect {path}: exit {r.returncode}: {r.stdout[-300:]}"
        assert "FAILED" in r.stdout, r.stdout


NAMED_WORKER = r"""
import ctypes, sys, threading
lib = ctypes.CDLL(sys.argv[1])
libc = ctypes.CDLL(None)
go = threading.Event()
rc = []
def worker():
    libc.prctl(15, b"dev\xff\xfe\xe2\x82", 0, 0, 0)  # PR_SET_NAME: invalid, and cut short
    print(threading.get_native_id(), flush=True)
    go.wait()
    a = [b"run"] + [x.encode() for x in sys.argv[2:]]
    rc.append(lib.spyre_sim_run_main(len(a), (ctypes.c_char_p * len(a))(*a)))
t = threading.Thread(target=worker)
t.start()
sys.stdin.read(1)
go.set()
t.join()
sys.exit(rc[0])
"""


def run_thread_tid_and_names(tmp):
    """-p given a thread id traces its process (and says so); a thread that
    named itself with invalid UTF-8 leaves both outputs valid."""
    lib = os.path.join(BUILD, "sim", "libspyre_simrun.so")
    py = subprocess.Popen(["python3", "-c", NAMED_WORKER, lib, "--jobs", "3", "--mock-dir",
                           os.path.join(tmp, "mock"), "--json", os.path.join(tmp, "sim.json")],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    cap = os.path.join(tmp, "cap.sbt")
    tr = None
    try:
        tid = int(py.stdout.readline())
        assert tid != py.pid
        tr = subprocess.Popen([a for a in tracer(tmp, "-p", str(tid)) if a != "-q"],
                              stderr=subprocess.PIPE, text=True)
        wait_for(lambda: os.path.exists(cap) and capture_has_probes(cap), 20, "the tracer to attach")
        py.stdin.write(b"g")
        py.stdin.close()
        assert py.wait(timeout=60) == 0
        _, err = tr.communicate(timeout=30)
    finally:
        for p in (py, tr):
            if p and p.poll() is None:
                p.kill()
    assert tr.returncode == 0, err
    assert f"PID {tid} is a thread of process {py.pid}: tracing the process" in err, err
    events, _ = parse_dump(cap)  # converts, inspects and protoc-decodes the .pftrace
    check_capture_matches_sim(events, json.load(open(os.path.join(tmp, "sim.json"))))
    raw = open(os.path.join(tmp, "cap.json"), "rb").read()
    trace = json.loads(raw.decode("utf-8"))  # strict: raises on any invalid byte
    names = [e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"]
    assert "dev\ufffd\ufffd\ufffd\ufffd" in names, f"the worker's name, replaced: {names}"


def proc_stat(pid):
    """A process's stat fields after its name (state first), or None once it
    is gone: any process may exit between a listing of /proc and the read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()
    except (OSError, IndexError):
        return None


def run_signals(tmp):
    """SIGHUP (the terminal closed) ends the recording as SIGTERM does;
    SIGUSR1 prints a status line and goes on; SIGKILL of the tracer takes
    the -c command with it."""
    cap = os.path.join(tmp, "cap.sbt")
    tr = subprocess.Popen([a for a in tracer(tmp, "-c", long_sim(tmp)) if a != "-q"],
                          stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(lambda: os.path.exists(cap) and capture_has_probes(cap), 20, "attach")
        tr.send_signal(signal.SIGUSR1)
        time.sleep(0.5)
        assert tr.poll() is None, "SIGUSR1 ended the tracer"
        tr.send_signal(signal.SIGHUP)
        _, err = tr.communicate(timeout=20)
    finally:
        kill_session(tr)
    assert tr.returncode == 0, f"exit {tr.returncode} after SIGHUP: {err}"
    assert re.search(r"spyre-bpftrace: [\d.]+ s, \d+ events, \d+ lost, [\d.]+ KiB written", err), err
    assert "interrupted" in err and len(end_record(cap)[1]) == 1, "no clean end after SIGHUP"
    tr = subprocess.Popen(tracer(tmp, "-c", long_sim(tmp)), stderr=subprocess.DEVNULL,
                          start_new_session=True)
    try:
        wait_for(lambda: capture_has_probes(cap), 20, "attach")
        child = [int(p) for p in os.listdir("/proc") if p.isdigit() and
                 (proc_stat(p) or ["", "", ""])[1] == str(tr.pid)]
        assert child, "no -c child found"
        os.kill(tr.pid, signal.SIGKILL)
        tr.wait(timeout=10)
        wait_for(lambda: not all((proc_stat(c) or ["Z"])[0] != "Z" for c in child), 10,
                 "the -c command to die with the tracer")
    finally:
        kill_session(tr)


def run_probe_matches_nothing(tmp):
    cmd = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "1"))
    r = subprocess.run([a for a in tracer(tmp, "--probe", "libnothere.so:foo*", "--probe",
                                          "libflex.so:zzz*", "-c", cmd) if a != "-q"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for spec in ("libnothere.so:foo*", "libflex.so:zzz*"):
        assert f"--probe '{spec}' matched no function" in r.stderr, r.stderr


def run_damaged_capture(tmp):
    """A capture whose call ends before it begins (one field damaged):
    convert drops that record, counts it, warns, and writes a valid trace."""
    cmd = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "2"))
    r = subprocess.run(tracer(tmp, "-c", cmd), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    cap = os.path.join(tmp, "cap.sbt")
    data = bytearray(open(cap, "rb").read())
    off, damaged = 16, 0
    while off + 24 <= len(data):
        rtype, size = int.from_bytes(data[off:off + 2], "little"), int.from_bytes(data[off + 2:off + 4], "little")
        if rtype == 2 and not damaged:  # call_exit: entry_ts after its own ts
            ts = int.from_bytes(data[off + 16:off + 24], "little")
            data[off + 32:off + 40] = (ts + 10**9).to_bytes(8, "little")
            damaged = 1
        off += (24 + size + 7) & ~7
    bad = os.path.join(tmp, "bad.sbt")
    open(bad, "wb").write(data)
    pf = os.path.join(tmp, "bad.pftrace")
    r = subprocess.run([TOOL, "convert", bad, "-o", pf], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "1 records dropped: they could not be true" in r.stderr, r.stderr
    r = subprocess.run([TOOL, "inspect", pf], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    # one policy and one wording wherever a capture is read: cut inside a
    # record, its whole records are used (a warning, exit 0); a record that
    # makes no sense stops the read (an error, exit 1), what came before
    # used and written
    good = open(cap, "rb").read()
    offs, off = [], 16
    while off + 24 <= len(good):
        offs.append(off)
        off += (24 + int.from_bytes(good[off + 2:off + 4], "little") + 7) & ~7
    cut, broken = os.path.join(tmp, "cut.sbt"), os.path.join(tmp, "broken.sbt")
    open(cut, "wb").write(good[:offs[-1] + 30])
    damaged = bytearray(good)
    damaged[offs[-5]:offs[-5] + 2] = b"\0\0"  # record type 0
    open(broken, "wb").write(damaged)
    fixture = os.path.join(TORCH_FIXTURE, "torch.json")
    for path, rc, said in ((cut, 0, f"{cut} ends inside a record (cut short?); used the {len(offs) - 1} whole records"),
                           (broken, 1, f"{broken}: record type 0 at offset {offs[-5]}; used the {len(offs) - 5} "
                                       "records before it")):
        for cmd, out in ((["convert", path, "-o"], os.path.join(tmp, "c.json")), (["dump", path], None),
                         (["report", path], None), (["merge", fixture, path, "-o"], os.path.join(tmp, "m.json"))):
            if out and os.path.exists(out):
                os.unlink(out)
            r = subprocess.run([TOOL, *cmd] + ([out] if out else []), capture_output=True, text=True)
            assert r.returncode == rc and said in r.stderr, (cmd, r.returncode, r.stderr[-500:])
            assert not out or json.load(open(out))["traceEvents"], f"{cmd}: nothing written of what was read"


def run_probe_option(tmp):
    """--probe with a library name and a glob adds only what it matches."""
    cmd = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "2"))
    r = subprocess.run(tracer(tmp, "--probe", "libsenlib.so:senlib::*Iommu*=map", "-c", cmd),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    events, _ = parse_dump(os.path.join(tmp, "cap.sbt"))
    probes = {e["name"]: e for e in events if e["type"] == "probe"}
    assert probes["senlib::PfIommuMapper::Map"]["pattern"] == "senlib::*Iommu*", \
        "user probe should win over the built-in one"
    assert probes["senlib::PfIommuMapper::Unmap"]["role"] == "map"
    assert "flex::RuntimeStream::launchH2D" in probes


def run_follows_children(tmp):
    """A -c shell that forks the workload: the child is followed from its
    fork on (BPF marks it traced there: every ioctl it makes is captured),
    and its runtime probes go on when the loader reads the fork record. The
    calls it made from then on are all there, in order, none invented, and
    the summary says how long after the fork the probes came (calls made
    before are not in the trace: docs/probes.md, "Which processes")."""
    sim = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "3", "--threads", "2"))
    libs = [os.path.join(BUILD, "sim", n) for n in ("libflex.so", "libsenlib.so")]
    # "; true" keeps the shell from exec'ing the workload in place
    r = subprocess.run([a for a in tracer(tmp, "--probe", libs[0] + ":flex::*", "--probe",
                                          libs[1] + ":senlib::*", "-c",
                                          f"sh -c {shlex.quote(sim + '; true')}") if a != "-q"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    events, _ = parse_dump(os.path.join(tmp, "cap.sbt"))
    sim_json = json.load(open(os.path.join(tmp, "sim.json")))
    forks = [e for e in events if e["type"] == "task_new" and e["new_process"] == "1"]
    assert [int(e["tgid"]) for e in forks] == [sim_json["pid"]], f"child not followed: {forks}"
    check_whole_run(events, sim_json)
    pid = sim_json["pid"]
    check_ioctls_match_sim([e for e in events if e["type"] == "ioctl" and e["tgid"] == pid], sim_json)
    got = check_calls_from_a_moment(events, sim_json)
    m = re.search(r"(\d+) child processes followed: runtime probes in place at most ([\d.]+) ms after "
                  r"their fork; calls made before that are not in the trace", r.stderr)
    assert m and int(m.group(1)) == 1, f"the summary does not say when the child's probes came:\n{r.stderr}"
    assert got > 0, "no call of the child captured"
    print(f"     child: {got} of {len(sim_json['call_log'])} calls, probes in place "
          f"{m.group(2)} ms after its fork")


def run_loss_is_counted(tmp):
    """A ring buffer far too small for four busy threads: what does not fit
    is counted, exactly, and marked in the capture."""
    threads = 4
    for jobs in (300, 1500):  # more if this machine drains faster
        cmd = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", str(jobs), "--threads",
                                                           str(threads), "--delay-us", "0",
                                                           "--bytes", "4096"))
        # not quiet: the summary must warn
        r = subprocess.run([a for a in tracer(tmp, "--buffer-size", "4K", "-c", cmd) if a != "-q"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        events, _ = parse_dump(os.path.join(tmp, "cap.sbt"))
        lost = int([e for e in events if e["type"] == "end"][0]["lost"])
        if lost:
            break
    else:
        # a machine that drains four busy threads through 4 KiB has not
        # been seen; should one come, the test needs more load, not a skip
        raise AssertionError("could not overflow a 4 KiB ring buffer with 4 threads of 1500 jobs")
    sim = json.load(open(os.path.join(tmp, "sim.json")))
    marks = [e for e in events if e["type"] == "lost"]
    assert sum(int(m["count"]) for m in marks) == lost, "lost marks do not add up to the total"
    assert int(marks[-1]["total"]) == lost
    assert f"WARNING: {lost} records lost" in r.stderr, "the summary does not report the loss"
    # and how full the ring buffer came (all of it, give or take a record)
    full = re.search(r"the ring buffer was at most (\d+)% full \(([\d.]+) of 4 KiB\); hint: a larger --buffer-size",
                     r.stderr)
    assert full and int(full.group(1)) >= 90, r.stderr
    # every record the workload caused was captured or counted lost: two per
    # call, one per ioctl, and the task records: the exec rename, the birth
    # and exit of each extra thread (workers and the mock device), the main exit
    bpf_types = {"call_enter", "call_exit", "ioctl", "task_new", "task_comm", "task_exit"}
    captured = sum(1 for e in events if e["type"] in bpf_types and e["tgid"] == sim["pid"])
    generated = 2 * len(sim["call_log"]) + len(sim["ioctls"]) + 2 * threads + 2
    # an entry the kernel skipped made no record (its return is unpaired;
    # a lost entry record leaves its frame pushed, so its return pairs)
    skipped = len(skipped_entries(events, sim["pid"]))
    assert captured + lost + skipped == generated, \
        f"captured {captured} + lost {lost} + skipped {skipped} != generated {generated}"


def irq_counts():
    counts = {}
    for line in open("/proc/interrupts"):
        head, _, rest = line.partition(":")
        if head.strip().isdigit():
            counts[int(head)] = sum(int(x) for x in rest.split() if x.isdigit())
    return counts


def disk_io(tmp, mib):
    """Direct writes: each completes with a disk interrupt."""
    subprocess.run(["dd", "if=/dev/zero", f"of={tmp}/io", "bs=64K", f"count={mib * 16}",
                    "oflag=direct"], capture_output=True, check=True)


def run_irq_filter(tmp):
    """--irq N records that interrupt's handlers, and no other interrupt."""
    a = irq_counts()
    disk_io(tmp, 8)
    b = irq_counts()
    delta, irq = max((b[i] - a.get(i, 0), i) for i in b)
    if delta == 0:
        raise Skip("no numbered interrupt fires on disk I/O on this machine")
    name = [ln.split()[-1] for ln in open("/proc/interrupts") if ln.split(":")[0].strip() == str(irq)][0]
    cap = os.path.join(tmp, "cap.sbt")
    before = irq_counts()[irq]
    tr = subprocess.Popen(tracer(tmp, "--irq", str(irq), "-d", "3", "-c", long_sim(tmp)),
                          stderr=subprocess.PIPE, text=True)
    wait_for(lambda: os.path.exists(cap) and capture_has_probes(cap), 20, "attach")
    disk_io(tmp, 8)
    _, err = tr.communicate(timeout=30)
    after = irq_counts()[irq]
    assert tr.returncode == 0, err
    events, _ = parse_dump(cap)
    irqs = [e for e in events if e["type"] == "irq"]
    assert irqs, f"no records of irq {irq} ({name}), which fired {after - before} times meanwhile"
    assert {int(e["irq"]) for e in irqs} == {irq}, "interrupts outside the filter recorded"
    assert len(irqs) <= after - before, f"{len(irqs)} records but irq {irq} fired {after - before} times"
    assert all(int(e["dur_ns"]) > 0 and e["ret"] in ("1", "2") for e in irqs), "odd handler records"
    info = [e for e in events if e["type"] == "irq_info" and int(e["irq"]) == irq]
    assert info and info[0]["name"] == name, f"irq named {info}, /proc/interrupts says {name}"


def run_verbose_plan(tmp):
    cmd = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "1"))
    r = subprocess.run([TOOL, "-v", "-o", os.path.join(tmp, "cap.sbt"), "-c", cmd],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "attach plan:" in r.stderr
    for want in ("runtime    -> uprobe", "late-libs  -> tracepoint syscalls:sys_*_openat", "ioctl      -> tracepoint syscalls:sys_*_ioctl",
                 "irq        -> raw_tp irq_handler_entry,exit", "fork       -> "):
        assert want in r.stderr, f"plan lacks '{want}':\n{r.stderr}"
    # driver level: each vfio function says what it got, or why nothing
    for fn in DRIVER_FUNCS:
        lines = [l for l in r.stderr.splitlines() if l.startswith("  driver ") and (fn + " " in l or fn + ":" in l)]
        assert lines, f"plan says nothing of {fn}:\n{r.stderr}"
        if not os.path.exists("/sys/kernel/btf/vfio_pci_core") and fn == "vfio_msihandler":
            assert any("no vfio_pci_core module BTF" in l for l in lines), lines
    assert "keeping 1014:06a7, 1014:06a8" in r.stderr, "Spyre's ids are not the default --device"
    assert "uprobe     -> " in r.stderr and "flex::RuntimeStream::launchH2D" in r.stderr


# scripts/vm.sh's exit codes for its own failures (others are the command's)
VM_DOWNLOAD_FAILED, VM_HUNG = 3, 4


def run_vm(tmp, cards, cmd, timeout, arch, env):
    out = os.path.join(tmp, "guest")
    try:
        r = subprocess.run([os.path.join(ROOT, "scripts", "vm.sh"), "--arch", arch, "--edu", str(cards),
                            "--out", out, "--timeout", str(timeout), "--", cmd],
                           capture_output=True, text=True, timeout=timeout + 600, env=env)
    except subprocess.TimeoutExpired as e:  # vm.sh itself stuck (a download, the initramfs)
        raise AssertionError(f"scripts/vm.sh gave no answer in {timeout + 600} s:\n"
                             f"{(e.stderr or b'')[-2000:]}") from None
    return out, r


def run_in_guest(tmp, cards, cmd, timeout, arch="x86_64", retry_hang=True):
    """Run cmd in the QEMU guest (scripts/vm.sh) of that architecture with
    that many edu cards bound to vfio-pci; returns the directory its /out
    came back to, and what vm.sh said. Skips only when something is
    absent (QEMU, the cross build, a package that could not be downloaded);
    a guest that hangs is retried once, said in the output, then fails
    with its last console lines."""
    qemu = {"x86_64": "qemu-system-x86_64", "ppc64le": "qemu-system-ppc64", "s390x": "qemu-system-s390x"}[arch]
    if not shutil.which(qemu):
        raise Skip(f"{qemu} missing (make deps installs it)")
    env = dict(os.environ)
    if arch != "x86_64":
        env["SBT_BUILD"] = os.path.join(BUILD, arch)
        if not os.path.exists(os.path.join(env["SBT_BUILD"], "spyre-bpftrace")):
            raise Skip(f"no {arch} build in {env['SBT_BUILD']} (make ARCH={arch}; make test does it)")
    out, r = run_vm(tmp, cards, cmd, timeout, arch, env)
    if r.returncode == VM_DOWNLOAD_FAILED and "vm: downloading " in r.stderr:
        raise Skip("a package could not be downloaded: " +
                   [ln for ln in r.stderr.splitlines() if ln.startswith("vm: downloading ")][-1])
    if r.returncode == VM_HUNG and retry_hang:
        print(f"     the {arch} guest gave no result in {timeout} s; trying once more. Its console:\n     " +
              "\n     ".join(r.stderr.strip().splitlines()[-12:]), flush=True)
        out, r = run_vm(tmp, cards, cmd, timeout, arch, env)
    assert r.returncode == 0, f"guest run failed ({r.returncode}):\n{r.stderr[-3000:]}"
    assert f"devices {cards}" in r.stderr, r.stderr
    return out, r.stderr


def run_guest_hang_is_a_failure(tmp):
    """A guest whose command sleeps past vm.sh's --timeout is a failure with
    its last console lines, never a skip."""
    timeout = 30  # hung in boot on a slow machine is still hung
    try:
        run_in_guest(tmp, 1, "echo SBT-VM: sleeping past the timeout > /dev/console; sleep 100000", timeout,
                     retry_hang=False)
    except Skip as e:
        raise AssertionError(f"a hung guest was skipped: {e}") from None
    except AssertionError as e:
        msg = str(e)
        assert f"guest run failed ({VM_HUNG})" in msg and f"no result in {timeout}s" in msg and \
            "the guest's last console lines" in msg, msg
        return
    raise AssertionError("a guest sleeping past --timeout passed")


POWER_DRIVER_FUNCS = ("vfio_fops_unl_ioctl", "vfio_group_fops_unl_ioctl", "vfio_device_fops_unl_ioctl",
                      "vfio_msihandler", "tce_iommu_ioctl", "mm_iommu_new")


def run_guest_power_spapr(tmp):
    """IBM Power: the ppc64le cross build in a pseries guest (Debian 12's 6.12
    kernel, TCG) tracing the simulator driving an edu card through vfio-pci
    and the sPAPR TCE IOMMU. The runtime's calls, nested, with their
    ioctls inside; every ioctl with Power's numbering and its
    arguments (the DMA window, registered memory, MAP/UNMAP), each mapping
    in tce_iommu_ioctl and each registration's pinning, every interrupt on
    its card, all through kprobes, the plan saying why not fentry."""
    cmd = ("build/spyre-bpftrace -q -v --device 1234:11e8 -o /out/cap.sbt "
           "-c 'build/spyre-sim-run --backend vfio --threads 1 --jobs 3 --bytes 8192 --json /out/sim.json' "
           "2> /out/rec.log; "
           # the daemon's always-on counters on Power, in the same guest
           "ip link set lo up; build/spyre-bpftrace daemon --device 1234:11e8 --listen 127.0.0.1:9464 "
           "--no-sampling --state-dir /tmp/state --runtime-dir /tmp/run 2> /out/daemon.log & D=$!; "
           "for i in $(seq 120); do wget -q -O /dev/null http://127.0.0.1:9464/healthz && break; sleep 1; done; "
           "build/spyre-sim-run --backend vfio --threads 1 --jobs 2 --bytes 8192 --json /out/dsim.json; "
           "wget -q -O /out/metrics.txt http://127.0.0.1:9464/metrics; kill $D; wait $D")
    out, _ = run_in_guest(tmp, 1, cmd, 240, arch="ppc64le")
    sim = json.load(open(os.path.join(out, "sim.json")))
    log = open(os.path.join(out, "rec.log")).read()
    assert not sim["failed"] and sim["job_failures"] == 0, sim
    card = sim["devices"][0]
    assert card["iommu"] == "spapr" and card["window_size"] > 0, card
    # the plan: kprobes, fentry's refusal named, no type1 function tried
    for fn in POWER_DRIVER_FUNCS:
        lines = [l for l in log.splitlines() if "driver" in l and re.search(r"\b" + fn + r"\b", l)]
        assert any("-> kprobe/kretprobe" in l for l in lines), f"{fn} not on kprobes:\n{log}"
        assert any("fentry " + fn + ": trial fentry attach: not supported (ENOTSUPP" in l for l in lines), \
            f"no reason given for {fn} without fentry:\n{log}"
    assert "vfio_iommu_type1_ioctl" not in log, "type1 tried on Power, which has none"
    check_plan_no_syscall_tracepoint(log, "kprobe/kretprobe")
    events, _ = parse_dump(os.path.join(out, "cap.sbt"))
    host = [e for e in events if e["type"] == "host"][0]
    assert host["release"].endswith("powerpc64le"), host
    # the runtime's calls too: return sites decoded for ppc64, entry
    # probes at the ELFv2 local entry
    assert "refused" not in log and "flex::RuntimeStream::launchH2D, 1 return site" in log, log
    check_capture_matches_sim(events, sim)
    ioctls = [e for e in events if e["type"] == "ioctl" and e["tgid"] == sim["pid"]]
    info = [e for e in ioctls if e["cmd"] == "VFIO_IOMMU_SPAPR_TCE_GET_INFO"]
    assert len(info) == 1 and num(info[0]["window_start"]) == card["window_start"] and \
        int(info[0]["window_size"]) == card["window_size"], info
    # the 64-bit dynamic window: its start read back after TCE_CREATE,
    # the same start removed
    assert card["ddw_size"] > 0, "the platform gave no dynamic window to test with"
    create = [e for e in ioctls if e["cmd"] == "VFIO_IOMMU_SPAPR_TCE_CREATE"]
    remove = [e for e in ioctls if e["cmd"] == "VFIO_IOMMU_SPAPR_TCE_REMOVE"]
    assert len(create) == 1 and num(create[0]["window_start"]) == card["ddw_start"] and \
        int(create[0]["window_size"]) == card["ddw_size"] and create[0]["page_shift"] == "16", create
    assert len(remove) == 1 and num(remove[0]["window_start"]) == card["ddw_start"], remove
    assert all(e["kind"] in ("spapr-container", "group", "device") for e in ioctls), \
        {e["kind"] for e in ioctls}
    regs = [i for i in sim["ioctls"] if i["cmd"] == "VFIO_IOMMU_SPAPR_REGISTER_MEMORY"]
    maps = [i for i in sim["ioctls"] if i["cmd"] == "VFIO_IOMMU_MAP_DMA"]
    assert regs and len(regs) == len(maps) and \
        len([i for i in sim["ioctls"] if i["cmd"] == "VFIO_IOMMU_SPAPR_UNREGISTER_MEMORY"]) == len(regs)
    # driver level: each MAP/UNMAP/(UN)REGISTER inside tce_iommu_ioctl with
    # its arguments and the card; each registration pinned its pages
    drv = [e for e in events if e["type"] == "driver"]
    mem_cmds = ("VFIO_IOMMU_MAP_DMA", "VFIO_IOMMU_UNMAP_DMA", "VFIO_IOMMU_SPAPR_REGISTER_MEMORY",
                "VFIO_IOMMU_SPAPR_UNREGISTER_MEMORY")
    want = [i for i in sim["ioctls"] if i["cmd"] in mem_cmds]
    seen = sorted((e for e in drv if e["func"] == "tce_iommu_ioctl" and e.get("cmd") in mem_cmds),
                  key=lambda e: e["ts"])
    assert len(seen) == len(want), f"tce_iommu_ioctl saw {len(seen)} of the {len(want)} mapping commands"
    for i, e in zip(want, seen):
        assert e["cmd"] == i["cmd"] and e["tid"] == i["tid"] and int(e["size"]) == i["size"], (i, e)
        assert num(e["iova"]) == i["iova"] if "iova" in e else num(e["vaddr"]) == i["vaddr"], (i, e)
        assert e.get("bdf") == card["bdf"] and int(e["ret"]) == 0, e
    pins = [e for e in drv if e["func"] == "mm_iommu_new"]
    assert sorted((num(e["vaddr"]), int(e["pages"])) for e in pins) == \
        sorted((r["vaddr"], r["size"] // 4096) for r in regs), f"pinning {pins} for {regs}"
    assert all(e["level"] == "2" for e in pins), "mm_iommu_new not inside tce_iommu_ioctl"
    # vfio's container handler names Power's commands as sPAPR's
    assert any(e["func"] == "vfio_fops_unl_ioctl" and e.get("cmd") == "VFIO_IOMMU_SPAPR_REGISTER_MEMORY"
               for e in drv)
    msi = [e for e in drv if e["func"] == "vfio_msihandler"]
    assert all(e.get("bdf") == card["bdf"] for e in msi), msi
    check_msi_runs({card["bdf"]: len(msi)}, {card["bdf"]: card["irqs"]}, kprobes=True)
    names = {int(e["irq"]): e["name"] for e in events if e["type"] == "irq_info"}
    irqs = [e for e in events if e["type"] == "irq" and names.get(int(e["irq"]), "").endswith(f"({card['bdf']})")]
    assert len(irqs) == card["irqs"] == card["h2d"] + card["compute"] + card["d2h"], (len(irqs), card)
    assert [e for e in events if e["type"] == "end"][0]["lost"] == "0"
    # the daemon: every ioctl counted under its sPAPR name, the card's
    # mapped bytes and interrupts, the sPAPR handler and the pinning counted
    dsim = json.load(open(os.path.join(out, "dsim.json")))
    m = parse_metrics(open(os.path.join(out, "metrics.txt")).read())
    want = {}
    for io in dsim["ioctls"]:
        want[io["cmd"]] = want.get(io["cmd"], 0) + 1
    got = {dict(k[1])["cmd"]: int(v) for k, v in m.items() if k[0] == "spyre_vfio_ioctls_total"}
    assert got == want and "VFIO_IOMMU_SPAPR_REGISTER_MEMORY" in got, f"daemon {got}, simulator {want}"
    dev = frozenset({("device", card["bdf"])})
    mapped = sum(io["size"] for io in dsim["ioctls"] if io["cmd"] == "VFIO_IOMMU_MAP_DMA")
    assert mapped and m[("spyre_iommu_mapped_bytes_total", dev)] == mapped, (m.get(("spyre_iommu_mapped_bytes_total", dev)), mapped)
    assert m[("spyre_device_interrupts_total", dev)] == dsim["devices"][0]["irqs"]
    calls = {dict(k[1])["function"]: int(v) for k, v in m.items() if k[0] == "spyre_vfio_driver_calls_total"}
    dregs = sum(1 for io in dsim["ioctls"] if io["cmd"] == "VFIO_IOMMU_SPAPR_REGISTER_MEMORY")
    assert calls.get("mm_iommu_new") == dregs and calls.get("tce_iommu_ioctl", 0) >= 2 * dregs, calls


def run_guest_z_big_endian(tmp):
    """IBM Z: the s390x cross build (big-endian BPF objects, opened from the
    skeleton of their little-endian twin) in an s390-ccw-virtio guest
    (Debian 12's 6.12 kernel, no BPF JIT) tracing the simulator driving two
    stand-in cards (virtio-rng with iommu_platform=on: real DMA and MSI-X
    through the zPCI IOMMU), each in its own type1 container. Every ioctl
    against the simulator's log, mappings at the IOVA range zPCI gives, each
    in vfio's type1 handler with its card, interrupts per card, all on
    kprobes with the plan saying why not fentry; the big-endian capture,
    dumped and converted on this x86 host, is byte for byte what the guest
    made of it."""
    cmd = ("build/spyre-bpftrace -q -v --device 1af4:1044 -o /out/cap.sbt "
           "-c 'build/spyre-sim-run --backend vfio --threads 2 --jobs 2 --bytes 8192 "
           "--container-per-card --json /out/sim.json' 2> /out/rec.log && "
           "build/spyre-bpftrace dump /out/cap.sbt > /out/dump.txt && "
           "build/spyre-bpftrace convert -o /out/guest.json /out/cap.sbt && "
           "build/spyre-bpftrace convert -o /out/guest.pftrace /out/cap.sbt")
    for attempt in (1, 2):
        out, _ = run_in_guest(tmp, 2, cmd, 300, arch="s390x")
        cap = os.path.join(out, "cap.sbt")
        # under TCG, without a BPF JIT, a ring-buffer reservation now and
        # then fails with the buffer all but empty (1 run in 6 here, 2
        # records of 148; cause not found): said, tried once more, and a
        # second loss fails
        lost = [e for e in parse_dump(cap, outputs=False)[0] if e["type"] == "end"][0]["lost"]
        if lost == "0" or attempt == 2:
            break
        print(f"     the s390x guest lost {lost} records (failed ring-buffer reservations); "
              "trying once more", flush=True)
    assert lost == "0", f"the s390x guest lost {lost} records, twice in a row"
    sim = json.load(open(os.path.join(out, "sim.json")))
    log = open(os.path.join(out, "rec.log")).read()
    with open(cap, "rb") as f:
        head = f.read(12)
    assert head[8:12] == b"\0\0\0\x01", f"not a big-endian capture: {head!r}"
    assert not sim["failed"] and sim["job_failures"] == 0 and len(sim["devices"]) == 2, sim["devices"]
    assert all(d["iommu"] == "type1" and d["irqs"] > 0 for d in sim["devices"]), sim["devices"]
    check_plan_driver_level(log, "kprobe/kretprobe")
    check_plan_no_syscall_tracepoint(log, "kprobe/kretprobe")
    assert "fentry vfio_iommu_type1_ioctl: trial fentry load: no BPF JIT in this kernel" in log, log
    # runtime returns are not probed on s390x until proven (retsites.c)
    assert "flex::RuntimeStream::launchH2D in /work/build/sim/libflex.so: return probes are not " \
           "enabled on s390x yet" in log, log
    assert "tce_iommu_ioctl" not in log, "sPAPR tried on Z"
    events, _ = parse_dump(cap)
    assert [e for e in events if e["type"] == "host"][0]["release"].endswith("s390x")
    ioctls = [e for e in events if e["type"] == "ioctl" and e["tgid"] == sim["pid"]]
    check_ioctls_match_sim(ioctls, sim)
    maps = [e for e in ioctls if e["cmd"] == "VFIO_IOMMU_MAP_DMA"]
    assert maps and all(num(e["iova"]) >= 1 << 32 for e in maps), "a mapping below zPCI's IOVA range"
    check_driver_level(events, sim, shared=False, ids="1af4:1044", kprobes=True)
    per_card = interrupts_per_card(events, "vfio-msix")
    assert per_card == {d["bdf"]: d["irqs"] for d in sim["devices"]}, (per_card, sim["devices"])
    assert [e for e in events if e["type"] == "end"][0]["lost"] == "0"
    dump = subprocess.run([TOOL, "dump", cap], capture_output=True, text=True, check=True).stdout
    assert dump == open(os.path.join(out, "dump.txt")).read(), "dump differs between the guest and this host"
    for ext in ("json", "pftrace"):
        here = os.path.join(tmp, "host." + ext)
        subprocess.run([TOOL, "convert", "-o", here, cap], check=True, capture_output=True)
        assert open(here, "rb").read() == open(os.path.join(out, "guest." + ext), "rb").read(), \
            f"the {ext} trace differs between the guest and this host"

def run_guest_kernel(tmp):
    """The same BPF objects on a second kernel: Debian's 6.1 in a QEMU guest
    (scripts/vm.sh), with QEMU's edu device bound to vfio-pci. The guest's
    capture must hold what the simulator did there, as on the host."""
    cmd = ("build/spyre-bpftrace -q -o /out/cap.sbt --vfio-path '/tmp/m/*' "
           "-c 'build/spyre-sim-run --threads 2 --jobs 4 --mock-dir /tmp/m --json /out/sim.json'")
    out, log = run_in_guest(tmp, 2, cmd, 120)
    assert "card 0000:00:03.0 bound to vfio-pci" in log, log
    events, _ = parse_dump(os.path.join(out, "cap.sbt"))
    release = [e for e in events if e["type"] == "host"][0]["release"]
    assert release.startswith("6.1."), f"ran on {release}, not the guest's 6.1 kernel"
    check_capture_matches_sim(events, json.load(open(os.path.join(out, "sim.json"))))


DRIVER_FUNCS = ("vfio_fops_unl_ioctl", "vfio_group_fops_unl_ioctl", "vfio_device_fops_unl_ioctl",
                "vfio_iommu_type1_ioctl", "vfio_pin_pages_remote", "vfio_unpin_pages_remote",
                "vfio_msihandler")


def check_plan_driver_level(log, mech):
    """The -v plan attached every vfio function with mech (fentry/fexit or
    kprobe/kretprobe): a silent fallback to the syscall path fails here."""
    for fn in DRIVER_FUNCS:
        line = [l for l in log.splitlines() if "driver" in l and "-> " in l and fn + " " in l]
        assert line and mech in line[0], f"{fn} not attached with {mech}:\n{log}"


def check_plan_no_syscall_tracepoint(log, mech):
    """With vfio's three handlers hooked by mech, record takes its ioctls
    there and the opens of libraries from do_filp_open: the plan attaches
    no syscall tracepoint, so no other process's syscalls pay while it
    records (the capture, checked against the simulator, holds every
    ioctl: they came through the handlers)."""
    chosen = [l.split(None, 2) for l in log.splitlines() if l.startswith("  ") and " -> " in l]
    hooks = {c[0]: c[2] for c in chosen if len(c) == 3}
    assert hooks.get("ioctl", "").startswith(mech.split("/")[0] + " "), f"ioctls not on {mech}:\n{log}"
    assert hooks.get("late-libs", "").startswith(mech + " "), f"library opens not on {mech}:\n{log}"
    assert "fd-track" not in hooks, f"fds tracked though vfio's handlers say which file:\n{log}"
    tps = [c for c in chosen if "syscalls:" in " ".join(c)]
    assert not tps, f"syscall tracepoints attached: {tps}"


def check_driver_level(events, sim, shared, ids="1234:11e8", kprobes=False):
    """Every MAP_DMA and UNMAP_DMA the simulator made, seen in vfio's type1
    handler with its iova, size and card; one vfio MSI handler run per job
    completion, on the right card."""
    drv = [e for e in events if e["type"] == "driver"]
    by_key = {}
    for e in drv:
        if e["func"] == "vfio_iommu_type1_ioctl" and e.get("cmd") in ("VFIO_IOMMU_MAP_DMA", "VFIO_IOMMU_UNMAP_DMA"):
            by_key.setdefault((e["tid"], e["cmd"], num(e["iova"]), int(e["size"])), []).append(e)
    maps = [i for i in sim["ioctls"] if i["cmd"] in ("VFIO_IOMMU_MAP_DMA", "VFIO_IOMMU_UNMAP_DMA")]
    assert maps, "the simulator mapped nothing"
    for i in maps:
        seen = by_key.get((i["tid"], i["cmd"], i["iova"], i["size"]), [])
        assert len(seen) == 1, f"{i['cmd']} iova {i['iova']:#x} size {i['size']}: driver saw {seen}"
        e = seen[0]
        assert int(e["ret"]) == 0 and e["level"] == "1", e
        if shared:
            assert e.get("cards") == "shared" and "bdf" not in e, f"shared container, yet {e}"
        else:
            assert e.get("bdf") == i["card"] and e.get("ids") == ids, \
                f"{i['cmd']} for {i['card']} attributed to {e.get('bdf')} {e.get('ids')}"
    assert sum(len(v) for v in by_key.values()) == len(maps), "the driver saw mappings the simulator did not make"
    # each map pinned its pages inside the type1 handler, on the same card
    for e in (e for e in drv if e["func"] == "vfio_pin_pages_remote"):
        assert e["level"] == "2" and int(e["ret"]) > 0, e
    msi = {}
    for e in (e for e in drv if e["func"] == "vfio_msihandler"):
        assert e.get("ids") == ids, f"MSI handler run without the card's ids: {e}"
        msi[e["bdf"]] = msi.get(e["bdf"], 0) + 1
    want = {d["bdf"]: d["irqs"] for d in sim["devices"]}
    check_msi_runs(msi, want, kprobes)


def check_msi_runs(got, want, kprobes):
    """vfio's MSI handler ran once per interrupt on each card. On kprobes
    (no fentry: Power, Z) one that lands while another kprobe's handler
    runs is missed, as the kernel does not nest kprobes: at most two in a
    run, as the daemon's guest test allows, and never an extra one."""
    if not kprobes:
        assert got == want, f"vfio MSI handler runs per card {got}, simulator raised {want}"
        return
    assert set(got) == set(want) and all(got[c] <= want[c] for c in want), (got, want)
    assert sum(want.values()) - 2 <= sum(got.values()), \
        f"vfio MSI handler runs per card {got}, simulator raised {want}"


def interrupts_per_card(events, prefix):
    """Interrupt records per card, from the names vfio-pci gave the vectors
    (vfio-msi[N](BDF), vfio-msix[N](BDF)); every one must have such a name."""
    names = {int(e["irq"]): e["name"] for e in events if e["type"] == "irq_info"}
    per_card = {}
    for e in (e for e in events if e["type"] == "irq"):
        name = names.get(int(e["irq"]), "")
        assert name.startswith(prefix), f"interrupt {e['irq']} named {name!r}"
        bdf = name[name.index("(") + 1:-1]
        per_card[bdf] = per_card.get(bdf, 0) + 1
    return per_card


def guest_vfio(tmp, cards, sim_args="", runs=(("auto", "fentry/fexit"),), extra=()):
    """Trace the simulator's vfio backend driving edu cards through real VFIO,
    once per (--driver-probes mode, mechanism the plan must show); extra
    commands run in the same guest after."""
    cmd = "; ".join(list(
        f"build/spyre-bpftrace -q -v --device 1234:11e8 --driver-probes {mode} -o /out/{mode}.sbt "
        f"-c 'build/spyre-sim-run --backend vfio --threads {cards} --jobs 2 --bytes 8192 {sim_args} "
        f"--json /out/{mode}-sim.json' 2> /out/{mode}.log" for mode, _ in runs) + list(extra))
    out, _ = run_in_guest(tmp, cards, cmd, 240)
    for mode, mech in runs:
        log = open(os.path.join(out, f"{mode}.log")).read()
        sim = json.load(open(os.path.join(out, f"{mode}-sim.json")))
        assert sim["job_failures"] == 0 and len(sim["devices"]) == cards, sim["devices"]
        check_plan_driver_level(log, mech)
        check_plan_no_syscall_tracepoint(log, mech)
        events, _ = parse_dump(os.path.join(out, f"{mode}.sbt"))
        # everything the simulator did, ioctl by ioctl, now all real and succeeding
        check_capture_matches_sim(events, sim)
        ioctls = [e for e in events if e["type"] == "ioctl"]
        assert ioctls and all(int(e["ret"]) >= 0 for e in ioctls), "a VFIO ioctl failed"
        # the IOMMU mapped each MAP_DMA's range inside that ioctl, on its thread
        maps = [e for e in events if e["type"] == "iommu_map"]
        for io in (e for e in ioctls if e["cmd"] == "VFIO_IOMMU_MAP_DMA"):
            start = io["ts"] - int(io["dur_ns"])
            inside = [m for m in maps if m["tid"] == io["tid"] and start <= m["ts"] <= io["ts"]]
            assert sum(int(m["size"]) for m in inside) == int(io["size"]), f"MAP_DMA {io['iova']}: iommu maps {inside}"
            assert min(num(m["iova"]) for m in inside) == num(io["iova"])
        check_driver_level(events, sim, shared=cards > 1 and "--container-per-card" not in sim_args,
                           kprobes=mech.startswith("kprobe"))
        # one MSI interrupt per job completion, on the right card
        per_card = interrupts_per_card(events, "vfio-msi")
        want = {d["bdf"]: d["irqs"] for d in sim["devices"]}
        assert per_card == want, f"interrupts per card {per_card}, simulator raised {want}"
        assert all(d["irqs"] == d["h2d"] + d["compute"] + d["d2h"] for d in sim["devices"])
        assert [e for e in events if e["type"] == "end"][0]["lost"] == "0"
        check_jobs_on_cards(os.path.join(out, f"{mode}.sbt"), sim)
    return out


JOB_ENGINES = {"Memcpy (HtoD)": "h2d", "Compute": "compute", "Memcpy (DtoH)": "d2h"}


def check_jobs_on_cards(cap, sim):
    """Every job the simulator ran is on the card that ran it, per engine,
    ended by that card's interrupt, and no interrupt finds no job: one
    process driving several cards included (its streams put on their cards
    by the interrupts that woke their waits)."""
    js = cap[:-4] + "-cards.json"
    r = subprocess.run([TOOL, "convert", cap, "-o", js], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    trace = json.load(open(js))["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in trace if e.get("ph") == "M" and e.get("name") == "process_name"}
    got = {}
    for e in trace:
        if e["ph"] == "X" and e["name"] in JOB_ENGINES:
            key = (names.get(e["pid"], "?"), JOB_ENGINES[e["name"]])
            got[key] = got.get(key, 0) + 1
            assert e["args"]["completed_by"] == "interrupt", f"a job not ended by its card's interrupt: {e}"
    want = {(f"PCI {d['bdf']}", k): d[k] for d in sim["devices"] for k in ("h2d", "compute", "d2h") if d[k]}
    assert got == want, f"jobs per card and engine: trace {got}, simulator {want}"
    report = subprocess.run([TOOL, "report", cap], capture_output=True, text=True).stdout
    assert "unmatched" not in report or " 0 interrupts with no job" in report, report[-1500:]
    cards = [l for l in report.splitlines() if l.startswith("# cards:")]
    if cards:  # how the streams found their cards, for whoever reads the log
        print(f"     {os.path.basename(cap)}: {cards[0][2:]}")


GUEST_LATE_DLOPEN = (
    "mkdir -p /tmp/hidden && cp build/sim/libspyre_simrun.so build/sim/libflex.so build/sim/libsenlib.so "
    "/tmp/hidden/ && build/spyre-bpftrace -v --device 1234:11e8 -o /out/late.sbt -c 'build/spyre-sim-dlopen "
    "/tmp/hidden/libspyre_simrun.so --backend vfio --jobs 40 --bytes 8192 --json /out/late-sim.json' "
    "2> /out/late.log")


def run_guest_vfio_one_card(tmp):
    """One card; the driver-level probes with fentry, then with kprobes.
    A runtime dlopen()ed from a directory nothing could know of, with no
    syscall tracepoint attached: do_filp_open saw the open, the runtime
    was probed at once, and its later calls are in the capture."""
    out = guest_vfio(tmp, 1, runs=(("auto", "fentry/fexit"), ("kprobe", "kprobe/kretprobe")),
                     extra=(GUEST_LATE_DLOPEN,))
    log = open(os.path.join(out, "late.log")).read()
    check_plan_no_syscall_tracepoint(log, "fentry/fexit")
    assert "library    -> /tmp/hidden/libflex.so (opened while traced)" in log, log[-3000:]
    assert re.search(r"runtime librar\w+ found when opened: runtime probes in place at most", log), log[-2000:]
    late = [e for e in parse_dump(os.path.join(out, "late.sbt"))[0] if e["type"] == "call_enter"]
    sim = json.load(open(os.path.join(out, "late-sim.json")))
    assert late and {e["tgid"] for e in late} == {sim["pid"]} and len(late) <= len(sim["call_log"]), \
        f"{len(late)} calls captured of {len(sim['call_log'])} made"
    print(f"     late dlopen in the guest, no syscall tracepoint: {len(late)} of {len(sim['call_log'])} calls")
    # parse_dump converted each capture: auto.json is the Chrome JSON
    trace = json.load(open(os.path.join(out, "auto.json")))["traceEvents"]
    jobs = [e for e in trace if e["ph"] == "X" and e["name"] in ("Memcpy (HtoD)", "Memcpy (DtoH)", "Compute")]
    assert jobs and all(e["args"]["completed_by"] == "interrupt" for e in jobs), \
        "with one card per process, every job ends at its completion interrupt"
    # each completion interrupt comes before the synchronize it released returns
    waits = [e for e in trace if e["ph"] == "X" and e["name"] == "flex::RuntimeStream::synchronize"]
    for j in jobs:
        end = j["ts"] + j["dur"]
        assert any(w["ts"] <= end <= w["ts"] + w["dur"] for w in waits) or \
            any(end <= w["ts"] + w["dur"] for w in waits), f"job ending {end} released no wait"
    # the driver's slices sit inside the ioctls that called them
    ioctls = [e for e in trace if e["ph"] == "X" and e.get("cat") == "ioctl"]
    for d in (e for e in trace if e["ph"] == "X" and e.get("cat") == "driver" and e["name"] != "vfio_msihandler"):
        assert any(i["tid"] == d["tid"] and i["ts"] <= d["ts"] and d["ts"] + d["dur"] <= i["ts"] + i["dur"]
                   for i in ioctls), f"driver slice outside any ioctl: {d}"


def run_guest_vfio_two_cards(tmp):
    """Two cards each in its own container (each mapping is one card's);
    then --device naming one card keeps that card's driver events and
    interrupts only, and the process's syscall-level ioctls all; then,
    with no wake-up watched, each stream still finds its card: by the
    buffer its launches name, which the driver mapped in that card's
    container."""
    one = ("build/spyre-bpftrace -q --device 0000:00:04.0 -o /out/one.sbt -c 'build/spyre-sim-run "
           "--backend vfio --threads 2 --jobs 2 --bytes 8192 --container-per-card --json /out/one-sim.json'")
    nowake = ("build/spyre-bpftrace -q --no-wake-hook --device 1234:11e8 -o /out/nowake.sbt -c "
              "'build/spyre-sim-run --backend vfio --threads 2 --jobs 2 --bytes 8192 --container-per-card "
              "--json /out/nowake-sim.json'")
    out = guest_vfio(tmp, 2, "--container-per-card", extra=(one, nowake))
    cap = os.path.join(out, "nowake.sbt")
    events, _ = parse_dump(cap)
    assert not [e for e in events if e["type"] == "wake"], "wake records with --no-wake-hook"
    check_jobs_on_cards(cap, json.load(open(os.path.join(out, "nowake-sim.json"))))
    report = subprocess.run([TOOL, "report", cap], capture_output=True, text=True).stdout
    assert "DMA-mapped in one card's container: 2;" in report, report[-800:]
    sim = json.load(open(os.path.join(out, "one-sim.json")))
    events, _ = parse_dump(os.path.join(out, "one.sbt"))
    check_capture_matches_sim(events, sim)
    drv = [e for e in events if e["type"] == "driver"]
    assert drv and {e["bdf"] for e in drv if "bdf" in e} == {"0000:00:04.0"}, \
        f"--device 0000:00:04.0 kept driver events of {sorted({e.get('bdf', '-') for e in drv})}"
    maps = [e for e in drv if e["func"] == "vfio_iommu_type1_ioctl" and e.get("cmd") == "VFIO_IOMMU_MAP_DMA"]
    want = [i for i in sim["ioctls"] if i["cmd"] == "VFIO_IOMMU_MAP_DMA" and i["card"] == "0000:00:04.0"]
    assert len(maps) == len(want) > 0, f"{len(maps)} MAP_DMA of the kept card seen, simulator made {len(want)}"
    names = {int(e["irq"]): e["name"] for e in events if e["type"] == "irq_info"}
    irqs = [names.get(int(e["irq"]), "") for e in events if e["type"] == "irq"]
    card = [d for d in sim["devices"] if d["bdf"] == "0000:00:04.0"][0]
    assert irqs == ["vfio-msi[0](0000:00:04.0)"] * card["irqs"], f"interrupts kept: {sorted(set(irqs))} x{len(irqs)}"


def check_wake_hook(log, cap, hook, by_interrupt):
    """The -v plan's wake-up hook is hook, and the report put by_interrupt
    streams on their cards by the interrupt that woke their wait."""
    line = re.search(r"^  wake\s+-> (\S+)", log, re.M)
    assert line and line.group(1) == hook, f"wake-up hook not {hook}:\n{log}"
    report = subprocess.run([TOOL, "report", cap], capture_output=True, text=True).stdout
    m = re.search(r"by the interrupt that woke their wait: (\d+)", report)
    assert m and int(m.group(1)) == by_interrupt, report[-1500:]


def run_guest_vfio_shared_container(tmp):
    """Two cards in one container: nothing but the interrupts tells which
    card a stream's jobs ran on. The waiters of the eventfd each interrupt
    signals, read at the interrupt, and of the one the woken thread writes
    next, at eventfd_write: by fentry, also when the runtime waits in
    epoll_wait() (the eventfd in an epoll), and by a kprobe; the
    sched_waking program when asked for: the same cards each way. With no
    kernel-function probe and no sched_waking, the interrupt's own waiters
    still (the simulator's card thread), no program on any wake-up."""
    extra = tuple(f"build/spyre-bpftrace -q -v {opts} --device 1234:11e8 -o /out/{name}.sbt -c "
                  f"'build/spyre-sim-run --backend vfio --threads 2 --jobs 2 --bytes 8192 {sim} "
                  f"--json /out/{name}-sim.json' 2> /out/{name}.log"
                  for name, opts, sim in (("sched", "--driver-probes off --wake-hook sched_waking", ""),
                                          ("epoll", "", "--wait-epoll"), ("irqonly", "--driver-probes off", "")))
    out = guest_vfio(tmp, 2, runs=(("auto", "fentry/fexit"), ("kprobe", "kprobe/kretprobe")), extra=extra)
    for name, hook in (("auto", "fentry"), ("kprobe", "kprobe"), ("sched", "raw_tp"), ("epoll", "fentry")):
        cap = os.path.join(out, f"{name}.sbt")
        check_wake_hook(open(os.path.join(out, f"{name}.log")).read(), cap, hook, 2)
        if name in ("sched", "epoll"):
            sim = json.load(open(os.path.join(out, f"{name}-sim.json")))
            assert sim["job_failures"] == 0 and len(sim["devices"]) == 2, sim["devices"]
            check_jobs_on_cards(cap, sim)
    # nothing on the scheduler: only the interrupt's program, which finds
    # the thread each MSI eventfd wakes (hop 0), and says what it misses
    log = open(os.path.join(out, "irqonly.log")).read()
    line = re.search(r"^  wake\s+-> raw_tp irq_handler_entry\s.*hint: --wake-hook sched_waking", log, re.M)
    assert line, f"no interrupt-only wake plan:\n{log}"
    sim = json.load(open(os.path.join(out, "irqonly-sim.json")))
    assert sim["job_failures"] == 0 and len(sim["devices"]) == 2, sim["devices"]
    events, _ = parse_dump(os.path.join(out, "irqonly.sbt"))
    wakes = [e for e in events if e["type"] == "wake"]
    irqs = sum(d["irqs"] for d in sim["devices"])
    assert wakes and all(e["hop"] == "0" for e in wakes) and len(wakes) <= irqs, \
        f"{len(wakes)} wake records (hops {sorted(set(e['hop'] for e in wakes))}) for {irqs} interrupts"


GUEST_TWO_PROCESSES = r"""
mkfifo /tmp/ga /tmp/gb
build/spyre-sim-run --backend vfio --card 0000:00:03.0 --wait-stdin --jobs 3 --bytes 8192 \
    --json /out/a-sim.json < /tmp/ga > /dev/null &
A=$!
build/spyre-sim-run --backend vfio --card 0000:00:04.0 --wait-ready --jobs 3 --bytes 8192 \
    --json /out/b-sim.json < /tmp/gb > /dev/null &
B=$!
exec 3> /tmp/ga 4> /tmp/gb
i=0
while [ $i -lt 100 ] && ! ls -l /proc/$B/fd | grep -q vfio-device; do sleep 0.1; i=$((i+1)); done
build/spyre-bpftrace -q -v --device 1234:11e8 -o /out/two.sbt -p $A -p $B 2> /out/two.log &
T=$!
i=0
while [ $i -lt 300 ] && ! grep -q "attach plan" /out/two.log; do sleep 0.1; i=$((i+1)); done
echo > /out/pids; echo $A $B > /out/pids
echo go >&3; echo go >&4
wait $A; wait $B; wait $T
"""


def run_guest_two_processes(tmp):
    """Two cards, one process each (one rank per card): the tracer attaches
    with -p to one process not yet started and one already driving its card,
    and every device job lands on the card that ran it, per engine as each
    simulator counted, completed by that card's interrupt."""
    out, _ = run_in_guest(tmp, 2, GUEST_TWO_PROCESSES, 240)
    log = open(os.path.join(out, "two.log")).read()
    check_plan_driver_level(log, "fentry/fexit")
    pid_a, pid_b = (int(x) for x in open(os.path.join(out, "pids")).read().split())
    sims = {pid_a: json.load(open(os.path.join(out, "a-sim.json"))),
            pid_b: json.load(open(os.path.join(out, "b-sim.json")))}
    events, _ = parse_dump(os.path.join(out, "two.sbt"))
    cards = {int(e["pid"]): e["bdf"] for e in events if e["type"] == "device"}
    assert cards == {pid_a: "0000:00:03.0", pid_b: "0000:00:04.0"}, \
        f"cards learned {cards} (the running process's from its open group fd)"
    for pid, sim in sims.items():
        assert sim["job_failures"] == 0 and [d["bdf"] for d in sim["devices"]] == [cards[pid]], sim["devices"]
    report = subprocess.run([TOOL, "report", os.path.join(out, "two.sbt")], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    for sim in sims.values():
        d = sim["devices"][0]
        section = report.stdout.split(f"# PCI {d['bdf']}")[1].split("\n# ")[0]
        for engine, key in (("H2D DMA", "h2d"), ("Compute", "compute"), ("D2H DMA", "d2h")):
            row = [ln.split() for ln in section.splitlines() if ln.strip().startswith(engine)]
            jobs = int(row[0][len(engine.split())]) if row else 0
            assert jobs == d[key], f"{d['bdf']} {engine}: {jobs} jobs in the trace, simulator ran {d[key]}"
        irqs = [ln.split()[-1] for ln in section.splitlines() if ln.strip().startswith("interrupts")]
        assert irqs == [str(d["irqs"])], f"{d['bdf']}: interrupts {irqs}, simulator {d['irqs']}"
    trace = json.load(open(os.path.join(out, "two.json")))["traceEvents"]
    jobs = [e for e in trace if e["ph"] == "X" and e["name"] in ("Memcpy (HtoD)", "Memcpy (DtoH)", "Compute")]
    assert len(jobs) == sum(sum(s["devices"][0][k] for k in ("h2d", "compute", "d2h")) for s in sims.values())
    assert all(e["args"]["completed_by"] == "interrupt" for e in jobs), "a job not ended by its card's interrupt"
    assert "unmatched" not in report.stdout or " 0 interrupts with no job" in report.stdout, report.stdout
    # the report's driver-level table counts every MAP_DMA both simulators made
    row = [ln.split() for ln in report.stdout.splitlines()
           if ln.strip().startswith("vfio_iommu_type1_ioctl VFIO_IOMMU_MAP_DMA ")]
    maps = sum(1 for s in sims.values() for i in s["ioctls"] if i["cmd"] == "VFIO_IOMMU_MAP_DMA")
    assert row and int(row[0][2]) == maps, f"report's MAP_DMA row {row}, simulators made {maps}"


THROW = os.path.join(BUILD, "spyre-sim-throw")
CXX_FLEX = os.path.join(BUILD, "sim", "cxx", "libflex.so")


def run_throw_unchanged(tmp):
    """A C++ runtime call that throws, caught by its caller: the app does the
    same traced as untraced (a uretprobe here aborts it with 'terminate
    called'), each throw is a call without return, and functions that
    return twice or switch stacks are refused with a reason, not fatal."""
    plain = subprocess.run([THROW, "9"], capture_output=True, text=True, timeout=30)
    assert plain.returncode == 0 and "thrown=3" in plain.stdout, plain
    cap = os.path.join(tmp, "cap.sbt")
    r = subprocess.run([TOOL, "-v", "-o", cap, "--probe", f"{CXX_FLEX}:flex_sim_*jmp",
                        "-c", f"{THROW} 9"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"tracer exit {r.returncode}: {r.stderr[-2000:]}"
    assert r.stdout == plain.stdout, f"traced app printed {r.stdout!r}, untraced {plain.stdout!r}"
    refused = [ln for ln in r.stderr.splitlines() if ln.startswith("  refused")]
    assert any("flex_sim_setjmp" in ln and "returns twice" in ln for ln in refused), refused
    assert any("flex_sim_longjmp" in ln and "switches stacks" in ln for ln in refused), refused
    events, _ = parse_dump(cap)
    assert not [e for e in events if e["type"] == "probe" and "jmp" in e["name"]], "refused function probed"
    enters = [e for e in events if e["type"] == "call_enter"]
    exits = [e for e in events if e["type"] == "call_exit"]
    h2d = "flex::RuntimeStream::launchH2D"
    # 9 from main (3 throw), 9 from synchronize (all throw, caught inside it)
    assert sum(e["name"] == h2d for e in enters) == 18
    assert sum(e["name"] == h2d for e in exits) == 6, "a launch that threw has a return"
    syncs = [e for e in exits if e["name"] == "flex::RuntimeStream::synchronize"]
    assert len(syncs) == 9 and all("unpaired" not in e and e["ret"] == "1" for e in syncs), \
        "synchronize, which caught a throw inside it, did not return paired with ret 1"
    trace = json.load(open(os.path.join(tmp, "cap.json")))["traceEvents"]
    left = [e for e in trace if e.get("name") == "call without return"
            and e.get("args", {}).get("function") == h2d]
    assert len(left) == 12, f"{len(left)} launches marked as left without return, 12 threw"


def lib_base(pid, path):
    """Where the file's first page is mapped in pid: {file offset: address}."""
    maps = []
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and os.path.realpath(f[5]) == os.path.realpath(path):
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            maps.append((int(f[2], 16), lo, hi))
    return maps


def byte_at(pid, path, off):
    for moff, lo, hi in lib_base(pid, path):
        if moff <= off < moff + (hi - lo):
            with open(f"/proc/{pid}/mem", "rb") as m:
                m.seek(lo + off - moff)
                return m.read(1)[0]
    raise AssertionError(f"{path}+{off:#x} not mapped in {pid}")


def symbol_offset(path, name):
    out = subprocess.run(["nm", "-D", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.endswith(" " + name):
            return int(line.split()[0], 16)
    raise AssertionError(f"{name} not in {path}")


def untraced_runs():
    out = subprocess.run(["bpftool", "-j", "map", "dump", "name", "untraced_runs"],
                         capture_output=True, text=True)
    assert out.returncode == 0, f"bpftool cannot read untraced_runs: {out.stderr}"
    total = 0
    for entry in json.loads(out.stdout):
        for v in entry.get("values", []):
            total += int(v["value"]) if isinstance(v["value"], int) else int.from_bytes(
                bytes(int(b, 16) for b in v["value"]), "little")
    return total


def run_untraced_process_untouched(tmp):
    """-p A while B runs the same runtime: B's copy of the library holds no
    breakpoint (A's does), no probe runs in B, and A is traced in full."""
    flex = os.path.join(BUILD, "sim", "libflex.so")
    h2d = symbol_offset(flex, "_ZN4flex13RuntimeStream9launchH2DEPvPKvm")
    os.makedirs(os.path.join(tmp, "b"))
    a = subprocess.Popen(sim_cmd(tmp, "--threads", "2", "--jobs", "5", "--wait-stdin"),
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    b = subprocess.Popen(sim_cmd(os.path.join(tmp, "b"), "--jobs", "200", "--delay-us", "0",
                                 "--wait-stdin"), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    cap = os.path.join(tmp, "cap.sbt")
    tr = subprocess.Popen(tracer(tmp, "-p", str(a.pid)), stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: os.path.exists(cap) and capture_has_probes(cap), 20, "the tracer to attach")
        wait_for(lambda: lib_base(b.pid, flex), 10, "B to map libflex")
        with open(flex, "rb") as f:
            f.seek(h2d)
            orig = f.read(1)[0]
        assert byte_at(a.pid, flex, h2d) == 0xCC, "the traced process has no breakpoint: test is blind"
        assert byte_at(b.pid, flex, h2d) == orig, "the untraced process got a breakpoint"
        b.stdin.write(b"g")
        b.stdin.close()
        assert b.wait(timeout=60) == 0
        assert byte_at(a.pid, flex, h2d) == 0xCC
        runs = untraced_runs()
        assert runs == 0, f"runtime probes ran {runs} times outside the traced process"
        a.stdin.write(b"g")
        a.stdin.close()
        assert a.wait(timeout=60) == 0
        _, err = tr.communicate(timeout=30)
        assert tr.returncode == 0, f"tracer exit {tr.returncode}: {err}"
    finally:
        for p in (a, b, tr):
            if p.poll() is None:
                p.kill()
    events, _ = parse_dump(cap)
    check_capture_matches_sim(events, json.load(open(os.path.join(tmp, "sim.json"))))
    sim_b = json.load(open(os.path.join(tmp, "b", "sim.json")))
    assert len(sim_b["call_log"]) > 1000, "B made too few calls to tell"
    assert not [e for e in events if e["tgid"] == sim_b["pid"]], "events of the untraced process"


def hidden_runtime(tmp, where):
    """The workload as a library with the runtime beside it, in a directory
    no default search covers."""
    d = os.path.join(tmp, *where)
    os.makedirs(d)
    for n in ("libspyre_simrun.so", "libflex.so", "libsenlib.so"):
        shutil.copy(os.path.join(BUILD, "sim", n), d)
    return os.path.join(d, "libspyre_simrun.so")


def run_python_env_runtime(tmp):
    """A Python program that dlopen()s the runtime from one of its package
    directories on import (as torch-spyre does): the tracer finds it there
    before the program starts, and every call is in the capture."""
    lib = hidden_runtime(tmp, ("pkgs", "fake_spyre"))
    args = ["--threads", "2", "--jobs", "3", "--mock-dir", os.path.join(tmp, "mock"), "--json",
            os.path.join(tmp, "sim.json")]
    code = ("import ctypes, sys; a = [b'run'] + [x.encode() for x in sys.argv[1:]]; "
            f"lib = ctypes.CDLL({lib!r}); "
            "sys.exit(lib.spyre_sim_run_main(len(a), (ctypes.c_char_p * len(a))(*a)))")
    cmd = " ".join(shlex.quote(x) for x in ["python3", "-c", code, *args])
    env = dict(os.environ, PYTHONPATH=os.path.join(tmp, "pkgs"))
    r = subprocess.run([a for a in tracer(tmp, "-v", "-c", cmd) if a != "-q"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, f"tracer exit {r.returncode}: {r.stderr[-3000:]}"
    want = f"library    -> {os.path.join(tmp, 'pkgs', 'fake_spyre', 'libflex.so')} (the Python environment's packages)"
    assert want in r.stderr, f"-v does not say the runtime came from the Python environment:\n{r.stderr[-3000:]}"
    assert "found when opened" not in r.stderr, "found late, not before the start"
    events, _ = parse_dump(os.path.join(tmp, "cap.sbt"))
    check_capture_matches_sim(events, json.load(open(os.path.join(tmp, "sim.json"))))


def run_late_dlopen(tmp):
    """A launcher that dlopen()s the runtime from a directory nothing could
    know of: the tracer sees the open, probes the file at once and says in
    the summary from when on calls are seen. What it captured is exactly
    the calls each thread made from some point on."""
    lib = hidden_runtime(tmp, ("hidden",))
    cmd = " ".join(shlex.quote(x) for x in [os.path.join(BUILD, "spyre-sim-dlopen"), lib,
                                            "--jobs", "60", "--mock-dir", os.path.join(tmp, "mock"),
                                            "--json", os.path.join(tmp, "sim.json")])
    r = subprocess.run([a for a in tracer(tmp, "-v", "-c", cmd) if a != "-q"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, f"tracer exit {r.returncode}: {r.stderr[-3000:]}"
    assert "watching for one to be loaded" in r.stderr, r.stderr[-2000:]
    assert f"library    -> {os.path.join(tmp, 'hidden', 'libflex.so')} (opened while traced)" in r.stderr
    m = re.search(r"(\d+) runtime librar\w+ found when opened: runtime probes in place at most ([\d.]+) ms", r.stderr)
    assert m and int(m.group(1)) == 2, f"the summary does not say when the probes came:\n{r.stderr[-2000:]}"
    events, _ = parse_dump(os.path.join(tmp, "cap.sbt"))
    sim = json.load(open(os.path.join(tmp, "sim.json")))
    got = check_calls_from_a_moment(events, sim)
    assert got, "no runtime call captured after the library was probed"
    # returns are live before their entry: every call seen entering is seen
    # leaving (a call in flight at that moment shows as a return without entry)
    trace = json.load(open(os.path.join(tmp, "cap.json")))["traceEvents"]
    assert not [e for e in trace if e.get("name") == "call without return"], "an entry without its return"
    print(f"     late dlopen: {got} of {len(sim['call_log'])} calls, "
          f"probes in place {m.group(2)} ms after the open")


def run_probe_keeps_builtin_role(tmp):
    """--probe naming a built-in function without =ROLE keeps its role (a
    wait stays a wait, so jobs complete); with =ROLE the role is that."""
    flex = os.path.join(BUILD, "sim", "libflex.so")
    cmd = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "3"))
    for spec, role in ((f"{flex}:flex::RuntimeStream::synchronize", "wait"),
                       (f"{flex}:flex::RuntimeStream::synchronize=user", "user")):
        r = subprocess.run(tracer(tmp, "--probe", spec, "-c", cmd), capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        events, _ = parse_dump(os.path.join(tmp, "cap.sbt"))
        probe = [e for e in events if e["type"] == "probe" and e["name"] == "flex::RuntimeStream::synchronize"]
        assert len(probe) == 1 and probe[0]["role"] == role, f"{spec}: {probe}"
        assert probe[0]["pattern"] == "flex::RuntimeStream::synchronize", "not the user's spec"
        CHECKED.discard(os.path.join(tmp, "cap.sbt"))
        trace = json.load(open(os.path.join(tmp, "cap.json")))["traceEvents"]
        unfinished = [e for e in trace if e.get("name") == "unfinished job"]
        # a wait ends the jobs; as a plain user function it ends none
        assert bool(unfinished) == (role == "user"), f"{spec}: {len(unfinished)} unfinished jobs"


TORCH_FIXTURE = os.environ.get("SBT_TORCH_FIXTURE", os.path.join(ROOT, "tests", "torch", "fixture"))


def sim_in_host_ids(events, sim):
    """The simulator ran in a pid namespace: its ids as the tracer saw them,
    through the capture's nspid records (every thread must have one)."""
    ns = {(int(e["ns_pid"]), int(e["ns_tid"])): (e["tgid"], e["tid"]) for e in events if e["type"] == "nspid"}
    pid = ns.get((sim["pid"], sim["pid"]))
    assert pid, f"no nspid record for the simulator's pid {sim['pid']}"

    ns_pid = sim["pid"]

    def tid(t):
        assert (ns_pid, t) in ns, f"no nspid record for the simulator's thread {t}"
        return ns[(ns_pid, t)][1]
    sim = dict(sim, pid=pid[0])
    sim["call_log"] = [(tid(t), n, b) for t, n, b in sim["call_log"]]
    sim["ioctls"] = [dict(i, tid=tid(i["tid"])) for i in sim["ioctls"]]
    return sim


def run_merge_pytorch(tmp):
    """The committed real run (scripts/torch-fixture.sh): torch.profiler in a
    Debian 13 chroot in its own pid namespace, the simulator started inside
    the op "spyre workload", all traced with -c. Merged, the ops sit on the
    tracer's ids for the profiled thread, every simulator call lies inside
    the op that started it, nothing partly overlaps, every arrow resolves."""
    fx = TORCH_FIXTURE
    cap = os.path.join(fx, "capture.sbt")
    info = json.load(open(os.path.join(fx, "info.json")))
    torch = json.load(open(os.path.join(fx, "torch.json")))
    events, _ = parse_dump(cap, outputs=False)
    sim = sim_in_host_ids(events, json.load(open(os.path.join(fx, "sim.json"))))
    check_capture_matches_sim(events, sim)

    out_json, out_pf = os.path.join(tmp, "m.json"), os.path.join(tmp, "m.pftrace")
    for out in (out_json, out_pf):
        r = subprocess.run([TOOL, "merge", os.path.join(fx, "torch.json"), cap, "-o", out],
                           capture_output=True, text=True)
        assert r.returncode == 0, f"merge failed: {r.stderr}"
    assert "REALTIME - BOOTTIME" in r.stderr and "spread" in r.stderr, r.stderr
    r = subprocess.run([TOOL, "inspect", out_pf], capture_output=True, text=True)
    assert r.returncode == 0, f"inspect: merged Perfetto trace has violations:\n{r.stdout}"
    m = json.load(open(out_json))
    check_aiu_rules(m)
    ev = m["traceEvents"]

    # the clock: the capture's snapshot, and the rule, in the output
    clock = next(e for e in events if e["type"] == "clock")
    mark = next(e for e in ev if e.get("name") == "clocks aligned")
    assert mark["args"]["realtime_minus_boottime_ns"] == int(clock["realtime"]) - int(clock["boottime"])
    assert mark["args"]["baseTimeNanoseconds"] == torch["baseTimeNanoseconds"]

    # the ops: on the tracer's ids of the profiled thread (nspid), not kineto's
    ns = {(int(e["ns_pid"]), int(e["ns_tid"])): (e["tgid"], e["tid"]) for e in events if e["type"] == "nspid"}
    host_pid, host_tid = ns[(info["pid"], info["tid"])]
    ops = [e for e in ev if e["ph"] == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    want_ops = [e for e in torch["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    assert len(ops) == len(want_ops), f"{len(ops)} ops merged of {len(want_ops)}"
    assert all(e["pid"] == host_pid for e in ops), "ops not on the traced process's pid"
    # kineto's own times, moved by one offset: durations unchanged to the ns
    assert sorted(round(float(e["dur"]) * 1000) for e in ops) == \
        sorted(round(float(e["dur"]) * 1000) for e in want_ops)
    work = [e for e in ops if e["name"] == "spyre workload"]
    assert len(work) == 1 and work[0]["tid"] == host_tid, work

    # every simulator call inside the op that started the simulator
    w0, w1 = float(work[0]["ts"]), float(work[0]["ts"]) + float(work[0]["dur"])
    calls = [e for e in ev if e["ph"] == "X" and e.get("cat") == "cuda_runtime" and e["pid"] == sim["pid"]]
    assert len(calls) == len(sim["call_log"]), f"{len(calls)} calls merged, the simulator made {len(sim['call_log'])}"
    outside = [e for e in calls if not (w0 <= float(e["ts"]) and float(e["ts"]) + float(e["dur"]) <= w1)]
    assert not outside, f"{len(outside)} simulator calls outside 'spyre workload' [{w0}, {w1}]: {outside[:2]}"
    # ... linked to it: its External id on the first call, and an arrow
    first = min(calls, key=lambda e: float(e["ts"]))
    assert first["args"].get("External id") == work[0]["args"]["External id"], first
    # every arrow resolves: each s has its f, each end inside a slice on its thread
    slices = {}
    for e in ev:
        if e["ph"] == "X":
            slices.setdefault((e["pid"], e["tid"]), []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"]), e))
    ends = {}
    for e in ev:
        if e["ph"] in ("s", "f"):
            ends.setdefault((e["cat"], e["id"]), []).append(e)
            holder = [x for a, b, x in slices.get((e["pid"], e["tid"]), []) if a <= float(e["ts"]) <= b]
            assert holder, f"flow end binds to no slice: {e}"
    for key, es in ends.items():
        assert sorted(x["ph"] for x in es) == ["f", "s"], f"flow {key} does not pair: {es}"
    spawn = [es for (cat, _), es in ends.items() if cat == "spawn"]
    assert len(spawn) == 1, f"{len(spawn)} spawn arrows"
    s = next(x for x in spawn[0] if x["ph"] == "s")
    f = next(x for x in spawn[0] if x["ph"] == "f")
    assert (s["pid"], s["tid"], s["ts"]) == (host_pid, host_tid, work[0]["ts"]), s
    assert (f["pid"], f["ts"]) == (sim["pid"], first["ts"]), f
    # the runtime in-process (ctypes, as torch-spyre): on the profiled
    # thread, each call inside the innermost op, with its External id and
    # an arrow from it
    inproc = sim_in_host_ids(events, json.load(open(os.path.join(fx, "inproc.json"))))
    assert inproc["pid"] == host_pid
    check_capture_matches_sim(events, inproc)
    upload = next(e for e in ops if e["name"] == "upload and run")
    u0, u1 = float(upload["ts"]), float(upload["ts"]) + float(upload["dur"])
    mine = [e for e in ev if e["ph"] == "X" and e.get("cat") == "cuda_runtime" and e["pid"] == host_pid]
    assert len(mine) == len(inproc["call_log"]), f"{len(mine)} in-process calls merged of {len(inproc['call_log'])}"
    for c in mine:
        assert c["tid"] == host_tid and u0 <= float(c["ts"]) and float(c["ts"]) + float(c["dur"]) <= u1, c
        assert c["args"].get("External id") == upload["args"]["External id"], c
    op_call = [es for (cat, _), es in ends.items() if cat == "op_call"]
    assert len(op_call) == len(mine), f"{len(op_call)} op->call arrows for {len(mine)} calls"
    for es in op_call:
        s = next(x for x in es if x["ph"] == "s")
        assert s["ts"] == upload["ts"] and s["tid"] == host_tid, s
    kept = [k for k in ends if k[0] == "fwdbwd"]
    want_fwdbwd = {e["id"] for e in torch["traceEvents"] if e.get("cat") == "fwdbwd"}
    assert len(kept) == len(want_fwdbwd), f"{len(kept)} of {len(want_fwdbwd)} fwdbwd arrows kept"

    # an op that crosses others and calls (none in the real run) goes to a
    # track of its own under the thread: no nesting broken anywhere
    up = next(e for e in torch["traceEvents"] if e.get("name") == "upload and run")
    cross = dict(up, name="crossing", ts=round(float(up["ts"]) + float(up["dur"]) / 2, 3),
                 args={"External id": 999999})
    crossed = os.path.join(tmp, "crossed.json")
    with open(crossed, "w") as f:
        json.dump(dict(torch, traceEvents=torch["traceEvents"] + [cross]), f)
    for out in (out_json, out_pf):
        r = subprocess.run([TOOL, "merge", crossed, cap, "-o", out], capture_output=True, text=True)
        assert r.returncode == 0 and "overlap tracks: 1" in r.stderr, r.stderr
    r = subprocess.run([TOOL, "inspect", out_pf], capture_output=True, text=True)
    assert r.returncode == 0, f"inspect: violations with a crossing op:\n{r.stdout}"
    m = json.load(open(out_json))
    check_aiu_rules(m)
    c = next(e for e in m["traceEvents"] if e.get("name") == "crossing")
    assert c["pid"] == host_pid and c["tid"] != host_tid, c


def arrows(trace):
    """(cat, pid of s, pid of f) of every arrow, and how many of each."""
    ends = {}
    for e in trace["traceEvents"]:
        if e["ph"] in ("s", "f"):
            ends.setdefault((e["cat"], e["id"]), {})[e["ph"]] = e["pid"]
    out = {}
    for (cat, _), se in ends.items():
        k = (cat, se.get("s"), se.get("f"))
        out[k] = out.get(k, 0) + 1
    return out


def run_merge_hosts_and_our_json(tmp):
    """Our own Chrome JSON merges like its capture (it keeps the clock,
    process starts and namespace ids); captures of two hosts join as one
    trace, each host's processes and cards apart, on one clock."""
    fx = TORCH_FIXTURE
    ours = os.path.join(tmp, "ours.json")
    r = subprocess.run([TOOL, "convert", os.path.join(fx, "capture.sbt"), "-o", ours], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    got = []
    for second in (os.path.join(fx, "capture.sbt"), ours):
        out = os.path.join(tmp, "m.json")
        r = subprocess.run([TOOL, "merge", os.path.join(fx, "torch.json"), second, "-o", out],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        check_meta_names(json.load(open(out)))
        got.append(arrows(json.load(open(out))))
    assert got[0] == got[1], f"merging our JSON differs from merging its capture:\n{got[0]}\n{got[1]}"
    assert any(k[0] == "op_call" for k in got[0]) and any(k[0] == "spawn" for k in got[0]), got[0]

    # two hosts: the second made under another host name (a UTS namespace)
    caps = []
    for host, jobs in (("", 2), ("other-host", 3)):
        d = os.path.join(tmp, f"h{jobs}")
        os.makedirs(d)
        cmd = tracer(d, "-c", " ".join(shlex.quote(a) for a in sim_cmd(d, "--jobs", str(jobs))))
        if host:
            cmd = ["unshare", "--uts", "sh", "-c", f"hostname {host} && exec " + " ".join(shlex.quote(a) for a in cmd)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        caps.append((os.path.join(d, "cap.sbt"), json.load(open(os.path.join(d, "sim.json")))))
    out_json, out_pf = os.path.join(tmp, "hosts.json"), os.path.join(tmp, "hosts.pftrace")
    for out in (out_json, out_pf):
        r = subprocess.run([TOOL, "merge", caps[0][0], caps[1][0], "-o", out], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    r = subprocess.run([TOOL, "inspect", out_pf], capture_output=True, text=True)
    assert r.returncode == 0, f"inspect:\n{r.stdout}"
    m = json.load(open(out_json))
    check_aiu_rules(m)
    names = {e["pid"]: e["args"]["name"] for e in m["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    pids = [caps[0][1]["pid"], caps[1][1]["pid"] + (1 << 22)]
    assert names.get(pids[1], "").endswith("@other-host"), names
    assert len([n for n in names.values() if "@other-host" in n]) == 2, names  # the process and its card
    for pid, (_, sim) in zip(pids, caps):
        calls = [e for e in m["traceEvents"] if e["ph"] == "X" and e.get("cat") == "cuda_runtime" and e["pid"] == pid]
        assert len(calls) == len(sim["call_log"]), f"pid {pid}: {len(calls)} calls, sim made {len(sim['call_log'])}"
    # each host's launch -> job arrows stay on that host: the second host's
    # cards are numbered after the first's (64 each)
    launches = [(s, f) for (cat, s, f) in arrows(m) if cat == "ac2g"]
    assert {s for s, _ in launches} == set(pids), launches
    for s, f in launches:
        assert (s >= 1 << 22) == (f >= 1000000000 + 64), f"launch in {s} -> job on {f}: crosses hosts"


MERGE_AS_LIMIT = 128 << 20  # address space: the in-memory merge needed 228 MiB RSS for 200k ops


def run_merge_bounded_memory(tmp):
    """A kineto trace of 200,000 ops (the real fixture's steps repeated,
    bench/gen_kineto.py) merges within a 128 MiB address space, which a
    merge holding the JSON in memory exceeds (1.1 KiB per op). The output
    under the limit is the output without it, byte for byte; every op is
    in it, the first step's ops exactly as the fixture's own merge places
    them, each later step the same moved by its span; the calls link as
    in the fixture's merge."""
    import resource
    fx = TORCH_FIXTURE
    cap = os.path.join(fx, "capture.sbt")
    big = os.path.join(tmp, "big.json")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_kineto.py"), "--ops", "200000",
                        "--from", os.path.join(fx, "torch.json"), "-o", big], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    copies = int(re.search(r"\((\d+) copies", r.stderr).group(1))

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MERGE_AS_LIMIT, MERGE_AS_LIMIT))

    small = os.path.join(tmp, "small.json")
    r = subprocess.run([TOOL, "merge", os.path.join(fx, "torch.json"), cap, "-o", small], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    linked = re.search(r"(\d+) of (\d+) runtime calls inside an op, linked", r.stderr).groups()
    outs = {}
    for name, pre in (("limited", limit), ("free", None)):
        for ext in ("json", "pftrace"):
            out = os.path.join(tmp, f"{name}.{ext}")
            r = subprocess.run([TOOL, "merge", big, cap, "-o", out], capture_output=True, text=True, preexec_fn=pre)
            assert r.returncode == 0, f"merge ({name}, {ext}) failed: {r.stderr}"
            assert re.search(r"(\d+) of (\d+) runtime calls inside an op, linked", r.stderr).groups() == linked, r.stderr
            outs[name, ext] = open(out, "rb").read()
    for ext in ("json", "pftrace"):
        assert outs["limited", ext] == outs["free", ext], f"the {ext} output under the memory limit differs"
    r = subprocess.run([TOOL, "inspect", os.path.join(tmp, "limited.pftrace")], capture_output=True, text=True)
    assert r.returncode == 0, f"inspect: violations in the bounded merge:\n{r.stdout}"

    def ops(doc):
        return [e for e in doc["traceEvents"] if e["ph"] == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    want = ops(json.load(open(small)))
    got = ops(json.loads(outs["limited", "json"]))
    assert len(got) == len(want) * copies, f"{len(got)} ops merged of {len(want) * copies}"
    step = len(want)
    key = lambda e: (e["name"], e["tid"], e["ts"], e["dur"])
    assert sorted(map(key, got[:step])) == sorted(map(key, want)), "the first step's ops are not placed as in the fixture's merge"
    # each later step: the same ops, names and durations, moved by one span
    span = float(got[step]["ts"]) - float(got[0]["ts"])
    for c in (1, copies // 2, copies - 1):
        part = got[c * step:(c + 1) * step]
        assert [(e["name"], e["dur"]) for e in part] == [(e["name"], e["dur"]) for e in got[:step]], f"step {c} differs"
        assert abs(float(part[0]["ts"]) - float(got[0]["ts"]) - c * span) < 0.01, f"step {c} not moved by {c} spans"
    print(f"  {len(got)} ops merged within {MERGE_AS_LIMIT >> 20} MiB of address space; {linked[0]} of {linked[1]} calls linked")


def run_merge_refuses_unalignable(tmp):
    """A trace whose clock cannot be tied to the capture's is refused, with
    the reason, and no output is written."""
    cap = os.path.join(TORCH_FIXTURE, "capture.sbt")
    old = os.path.join(tmp, "torch113.json")  # Debian 12's torch 1.13, no kineto
    with open(old, "w") as f:
        json.dump([{"name": "aten::add", "ph": "X", "ts": 10, "dur": 3, "tid": 1, "pid": "CPU functions",
                    "args": {}}], f)
    noclock = os.path.join(tmp, "noclock.json")
    with open(noclock, "w") as f:
        json.dump({"traceEvents": [{"name": "aten::add", "ph": "X", "ts": 10, "dur": 3, "tid": 1, "pid": 1}]}, f)
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"traceEvents": [')
    for path, want in ((old, "without kineto"), (noclock, "baseTimeNanoseconds"), (bad, "is not JSON")):
        out = os.path.join(tmp, "m.pftrace")
        r = subprocess.run([TOOL, "merge", path, cap, "-o", out], capture_output=True, text=True)
        assert r.returncode == 1, f"{path}: exit {r.returncode}: {r.stderr}"
        assert want in r.stderr and "hint" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not os.path.exists(out), "an output was written for a refused merge"
    r = subprocess.run([TOOL, "merge", cap, "-o", os.path.join(tmp, "m.pftrace")], capture_output=True, text=True)
    assert r.returncode == 2 and "two traces" in r.stderr, r.stderr


def free_port():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def http_get(url, timeout=5):
    import urllib.request
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def prom_query(port, q):
    import urllib.parse
    _, body = http_get(f"http://127.0.0.1:{port}/api/v1/query?query=" + urllib.parse.quote(q))
    data = json.loads(body)
    assert data["status"] == "success", data
    return data["data"]["result"]


def start_prometheus(tmp, target_port):
    """Debian's Prometheus on loopback, scraping the daemon every second."""
    if not shutil.which("prometheus"):
        raise AssertionError("prometheus not installed; hint: make deps (Debian's prometheus)")
    port = free_port()
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: spyre\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{target_port}']\n")
    prom = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/tsdb",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "prometheus.log"), "w"))

    def ready():
        try:
            return http_get(f"http://127.0.0.1:{port}/-/ready", 1)[0] == 200
        except Exception:  # noqa: BLE001 - not up yet
            return False
    wait_for(ready, 30, "Prometheus to start")
    return prom, port


def check_deploy_files(metrics_text, tmp):
    """deploy/: Prometheus accepts the scrape config and the alert rules,
    systemd the unit; every spyre_ metric the rules and the Grafana
    dashboard use is one the daemon serves."""
    dep = os.path.join(ROOT, "deploy")
    for args in (["check", "config", os.path.join(dep, "prometheus", "scrape.yml")],
                 ["check", "rules", os.path.join(dep, "prometheus", "spyre-alerts.yml")]):
        r = subprocess.run(["promtool", *args], capture_output=True, text=True)
        assert r.returncode == 0, f"promtool {' '.join(args)}: {r.stdout}{r.stderr}"
    if shutil.which("systemd-analyze"):
        unit = open(os.path.join(dep, "systemd", "spyre-bpftrace.service")).read()
        local = os.path.join(tmp, "spyre-bpftrace.service")
        with open(local, "w") as f:
            f.write(unit.replace("/usr/local/bin/spyre-bpftrace", TOOL))
        r = subprocess.run(["systemd-analyze", "verify", "--man=no", local], capture_output=True, text=True)
        bad = [l for l in (r.stdout + r.stderr).splitlines() if "spyre-bpftrace.service" in l]
        assert not bad, f"systemd-analyze verify: {bad}"
    served = {re.sub(r"_(bucket|sum|count)$", "", l.split("{")[0].split()[0])
              for l in metrics_text.splitlines() if l.startswith("spyre_")}
    # a family declared with no series yet (the sampled device metrics
    # before any window had a job) is served too
    served |= set(re.findall(r"^# TYPE (spyre_[a-z_]+) ", metrics_text, re.M))
    used = set(re.findall(r"spyre_[a-z_]+", open(os.path.join(dep, "prometheus", "spyre-alerts.yml")).read()))
    dash = json.load(open(os.path.join(dep, "grafana", "spyre-bpftrace.json")))
    for panel in dash["panels"]:
        for t in panel["targets"]:
            used |= set(re.findall(r"spyre_[a-z_]+", t["expr"]))
    used = {re.sub(r"_(bucket|sum|count)$", "", u) for u in used}
    assert used and used <= served, f"deploy/ uses metrics the daemon does not serve: {sorted(used - served)}"


def run_daemon_prometheus(tmp):
    """The always-on daemon, scraped by a real Prometheus: its ioctl counts by
    command (and failures, and mapped bytes) equal what the simulator's runs
    did, for runs that started after the daemon and one whose files were
    already open when it started; no uprobe is attached; no label names a
    process; SIGHUP looks again, SIGTERM ends it cleanly."""
    os.makedirs(os.path.join(tmp, "mock"))
    port = free_port()
    # a job that opened its card before the daemon started
    early = subprocess.Popen([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--jobs", "3", "--wait-ready",
                              "--json", os.path.join(tmp, "early.json")],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)

    def blocked_on_stdin():  # its card set up: waiting in read(0, ...)
        try:
            return open(f"/proc/{early.pid}/syscall").read().startswith("0 0x0 ")
        except OSError:
            return False
    wait_for(blocked_on_stdin, 20, "the early job to set up its card")
    # the always-on tier alone: no sampled or triggered window (the mock
    # card's ioctls all fail, which would trigger one)
    quiet = ["--no-sampling", "--no-triggers", "--state-dir", os.path.join(tmp, "state"), "--vfio-path", tmp]
    daemon = subprocess.Popen([TOOL, "daemon", "--listen", f"127.0.0.1:{port}", *quiet],
                              stderr=subprocess.PIPE, text=True)
    prom = None
    try:
        def up():
            try:
                return http_get(f"http://127.0.0.1:{port}/healthz", 1) == (200, "ok\n")
            except Exception:  # noqa: BLE001 - not up yet
                return False
        wait_for(up, 20, "the daemon to serve /healthz")
        prom, pport = start_prometheus(tmp, port)
        links = json.loads(subprocess.run(["bpftool", "link", "list", "-j"], capture_output=True,
                                          text=True).stdout or "[]")
        assert not [l for l in links if l.get("type") in ("uprobe_multi",) or
                    "uprobe" in json.dumps(l)] and \
            not [p for p in our_bpf_objects()[2] if "uprobe" in p.get("fd_type", "")], \
            "the always-on tier attached a uprobe"
        early.stdin.write(b"g")
        early.stdin.close()
        assert early.wait(timeout=60) == 0
        sims = []
        for i, args in enumerate((["--threads", "2", "--jobs", "4"], ["--jobs", "5", "--bytes", "8192"])):
            out = os.path.join(tmp, f"sim{i}.json")
            r = subprocess.run([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--json", out, *args],
                               capture_output=True, timeout=60)
            assert r.returncode == 0, r.stderr
            sims.append(json.load(open(out)))
        # what the daemon must have counted: all of the later runs, and the
        # early one's ioctls after it was let go
        want, want_err, want_mapped = {}, {}, 0
        e = json.load(open(os.path.join(tmp, "early.json")))
        assert e["ioctls_before_ready"] >= 2, e["ioctls_before_ready"]  # its setup, before the daemon
        for io in [i for s in sims for i in s["ioctls"]] + e["ioctls"][e["ioctls_before_ready"]:]:
            want[io["cmd"]] = want.get(io["cmd"], 0) + 1
            want_err[io["cmd"]] = want_err.get(io["cmd"], 0) + (io["ret"] < 0)
            if io["cmd"] == "VFIO_IOMMU_MAP_DMA" and io["ret"] >= 0:
                want_mapped += io["size"]
        assert want.get("VFIO_IOMMU_MAP_DMA", 0) >= 12, want

        def got():
            return {r["metric"]["cmd"]: int(float(r["value"][1]))
                    for r in prom_query(pport, "spyre_vfio_ioctls_total")}
        try:
            wait_for(lambda: got() == want, 30, "Prometheus to hold the simulator's counts")
        except Exception:  # noqa: BLE001 - say what differs
            raise AssertionError(f"Prometheus has {got()}, the simulator did {want}")
        errs = {r["metric"]["cmd"]: int(float(r["value"][1]))
                for r in prom_query(pport, "spyre_vfio_ioctl_errors_total")}
        assert errs == want_err, f"errors: Prometheus {errs}, simulator {want_err}"
        mapped = sum(float(r["value"][1]) for r in prom_query(pport, "spyre_iommu_mapped_bytes_total"))
        assert mapped == want_mapped, f"mapped bytes: {mapped} vs {want_mapped}"
        hist = prom_query(pport, 'spyre_vfio_ioctl_duration_seconds_count{cmd="VFIO_IOMMU_MAP_DMA"}')
        assert int(float(hist[0]["value"][1])) == want["VFIO_IOMMU_MAP_DMA"], hist
        le = prom_query(pport, 'spyre_vfio_ioctl_duration_seconds_bucket{cmd="VFIO_IOMMU_MAP_DMA",le="+Inf"}')
        assert int(float(le[0]["value"][1])) == want["VFIO_IOMMU_MAP_DMA"], le
        allowed = {"__name__", "job", "instance", "cmd", "device", "vendor_device", "numa", "le", "version",
                   "program", "reason", "hook", "mechanism"}
        for r in prom_query(pport, '{__name__=~"spyre_.*"}'):
            assert set(r["metric"]) <= allowed, f"unbounded label in {r['metric']}"
        check_deploy_files(http_get(f"http://127.0.0.1:{port}/metrics")[1], tmp)
        # a second daemon on the same port, a bad address: one line, a hint
        r = subprocess.run([TOOL, "daemon", "--listen", f"127.0.0.1:{port}", *quiet], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1 and "Address already in use; hint:" in r.stderr, r.stderr
        r = subprocess.run([TOOL, "daemon", "--listen", "localhost"], capture_output=True, text=True)
        assert r.returncode == 2 and "not ADDR:PORT; hint: 127.0.0.1:9464" in r.stderr, r.stderr
        daemon.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert http_get(f"http://127.0.0.1:{port}/healthz")[1] == "ok\n"
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=20)
        assert daemon.returncode == 0, f"daemon exit {daemon.returncode}: {err}"
        assert "SIGHUP:" in err and "stopping on Terminated" in err, err
    finally:
        for p in (early, daemon, prom):
            if p and p.poll() is None:
                p.kill()
                p.wait()


def parse_metrics(text):
    """Prometheus text exposition to {(name, frozenset(labels)): value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        assert m, f"not exposition format: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def check_guest_daemon(out, phase, mech):
    """One daemon run in the guest: its metrics against the simulator's."""
    sim = json.load(open(os.path.join(out, f"sim{phase}.json")))
    assert sim["job_failures"] == 0 and len(sim["devices"]) == 2, sim
    log = open(os.path.join(out, f"daemon{phase}.log")).read()
    assert "2 cards on vfio-pci watched" in log and "stopping on Terminated" in log, log
    m = parse_metrics(open(os.path.join(out, f"metrics{phase}.txt")).read())
    want = {}
    for io in sim["ioctls"]:
        want[io["cmd"]] = want.get(io["cmd"], 0) + 1
    got = {dict(k[1])["cmd"]: int(v) for k, v in m.items() if k[0] == "spyre_vfio_ioctls_total"}
    assert got == want, f"ioctls: daemon {got}, simulator {want}"
    assert all(v == 0 for k, v in m.items() if k[0] == "spyre_vfio_ioctl_errors_total")
    for d in sim["devices"]:
        card = d["bdf"]
        dev = frozenset({("device", card)})
        mapped = sum(io["size"] for io in sim["ioctls"] if io["cmd"] == "VFIO_IOMMU_MAP_DMA" and io["card"] == card)
        unmapped = sum(io["size"] for io in sim["ioctls"] if io["cmd"] == "VFIO_IOMMU_UNMAP_DMA" and io["card"] == card)
        assert mapped > 0 and m[("spyre_iommu_mapped_bytes_total", dev)] == mapped, \
            (card, m.get(("spyre_iommu_mapped_bytes_total", dev)), mapped)
        assert m[("spyre_iommu_unmapped_bytes_total", dev)] == unmapped, card
        assert m[("spyre_device_pinned_bytes", dev)] == mapped - unmapped, card
        assert d["irqs"] > 0 and m[("spyre_device_interrupts_total", dev)] == d["irqs"], \
            (card, m.get(("spyre_device_interrupts_total", dev)), d["irqs"])
        info = [k for k in m if k[0] == "spyre_device_info" and ("device", card) in k[1]]
        assert info and ("vendor_device", "1234:11e8") in info[0][1], info
    assert m[("spyre_iommu_mapped_bytes_total", frozenset({("device", "unknown")}))] == 0
    # vfio's own functions, counted by the driver-level programs: each ioctl
    # passed one of the three file handlers, each mapping type1's, each
    # interrupt the MSI handler
    check_plan_driver_level(log, mech)
    calls = {dict(k[1])["function"]: int(v) for k, v in m.items() if k[0] == "spyre_vfio_driver_calls_total"}
    fops = sum(calls.get(f, 0) for f in ("vfio_fops_unl_ioctl", "vfio_group_fops_unl_ioctl",
                                          "vfio_device_fops_unl_ioctl"))
    assert fops == len(sim["ioctls"]), f"vfio's ioctl handlers ran {calls}, the simulator made {len(sim['ioctls'])}"
    maps = sum(1 for io in sim["ioctls"] if io["cmd"] in ("VFIO_IOMMU_MAP_DMA", "VFIO_IOMMU_UNMAP_DMA"))
    assert calls.get("vfio_iommu_type1_ioctl", 0) >= maps and calls.get("vfio_pin_pages_remote", 0) > 0, calls
    irqs = sum(d["irqs"] for d in sim["devices"])
    if mech.startswith("fentry"):
        assert calls.get("vfio_msihandler") == irqs, f"MSI handler {calls.get('vfio_msihandler')}, interrupts {irqs}"
    else:  # kprobes do not nest: an MSI that lands in another kprobe's handler is missed
        assert irqs - 2 <= calls.get("vfio_msihandler", 0) <= irqs, \
            f"MSI handler {calls.get('vfio_msihandler')}, interrupts {irqs}"
    progs = [dict(k[1])["program"] for k in m if k[0] == "spyre_bpftrace_bpf_runs_total"]
    assert len(progs) == len(set(progs)), f"two programs under one label: {sorted(progs)}"
    # VFIO ioctls counted in vfio's own handlers: no syscall tracepoint is
    # even loaded, so no syscall of another process pays
    hook = mech.split("/")[0]
    assert m.get(("spyre_bpftrace_hook_info", frozenset({("hook", "ioctl"), ("mechanism", hook)}))) == 1, \
        [k for k in m if k[0] == "spyre_bpftrace_hook_info"]
    # who an interrupt woke, in windows: at the interrupt, and at
    # eventfd_write (fentry or a kprobe): no program on the scheduler
    wake = "eventfd"
    assert m.get(("spyre_bpftrace_hook_info", frozenset({("hook", "wake"), ("mechanism", wake)}))) == 1, \
        [k for k in m if k[0] == "spyre_bpftrace_hook_info"]
    assert not {"ioctl_enter", "ioctl_exit"} & set(progs), f"syscall tracepoint programs loaded: {sorted(progs)}"
    assert f"ioctl {hook} " in log or f"ioctl      {hook}" in log or "no syscall tracepoint" in log, log
    hist = [v for k, v in m.items() if k[0] == "spyre_vfio_driver_call_duration_seconds_count" and
            ("function", "vfio_iommu_type1_ioctl") in k[1]]
    assert hist == [calls["vfio_iommu_type1_ioctl"]], hist


def run_guest_daemon(tmp):
    """The daemon in the guest, where the simulator drives edu cards through
    real VFIO: one process, two cards, a container each. Its metrics hold
    each ioctl, the bytes mapped for each card (by the container the mapping
    went to) and each card's interrupts, as the simulator counted them, and
    vfio's own functions as its driver-level programs counted them: fentry
    (what it chooses there), then kprobes (what it falls back to). A
    detail window of a one-card job correlates as record would."""
    phase = ("build/spyre-bpftrace daemon -v --device 1234:11e8 --listen 127.0.0.1:946{n} --no-sampling "
             "--state-dir /tmp/state{n} --runtime-dir /tmp/run{n} --driver-probes {mode} 2> /out/daemon{n}.log & D=$!; "
             "for i in $(seq 120); do wget -q -O /dev/null http://127.0.0.1:946{n}/healthz && break; sleep 1; done; "
             "build/spyre-sim-run --backend vfio --threads 2 --jobs 3 --bytes 16384 --container-per-card "
             "--json /out/sim{n}.json; "
             "wget -q -O /out/metrics{n}.txt http://127.0.0.1:946{n}/metrics; {window}kill $D; wait $D; ")
    # then a window with a one-card job in it, its interrupts and the
    # wake-ups they cause as they come: the recorder must hold them in
    # the order they happened, as record does
    window = ("build/spyre-bpftrace ctl --runtime-dir /tmp/run1 record --seconds 8 -o /out/win1.sbt > /out/win1.txt & "
              "R=$!; sleep 2; build/spyre-sim-run --backend vfio --card 0000:00:03.0 --threads 1 --jobs 5 "
              "--bytes 16384 --json /out/one1.json > /dev/null; wait $R; "
              "wget -q -O /out/metrics1w.txt http://127.0.0.1:9461/metrics; "
              # and one process driving both cards, a container each
              "build/spyre-bpftrace ctl --runtime-dir /tmp/run1 record --seconds 8 -o /out/win2.sbt > /out/win2.txt & "
              "R=$!; sleep 2; build/spyre-sim-run --backend vfio --threads 2 --jobs 3 --bytes 16384 "
              "--container-per-card --json /out/two1.json > /dev/null; wait $R; ")
    cmd = ("ip link set lo up; " + phase.format(n=1, mode="auto", window=window) +
           phase.format(n=2, mode="kprobe", window=""))
    out, _ = run_in_guest(tmp, 2, cmd, 300)
    check_guest_daemon(out, 1, "fentry/fexit")
    check_guest_daemon(out, 2, "kprobe/kretprobe")
    check_guest_window(out)


def check_guest_window(out):
    """A detail window of a one-card job in the guest: every job the
    simulator ran is on its card, per engine, each ended by the card's
    interrupt, no interrupt without a job: the snapshot correlates as a
    record of the run does (the recorder puts records in order). The
    sampled device metrics count the same jobs per card and engine. A
    window of one process driving two cards: every job on its card."""
    assert open(os.path.join(out, "win1.txt")).read().startswith("ok /out/win1.sbt"), \
        open(os.path.join(out, "win1.txt")).read() + open(os.path.join(out, "daemon1.log")).read()[-3000:]
    sim = json.load(open(os.path.join(out, "one1.json")))
    assert sim["job_failures"] == 0 and len(sim["devices"]) == 1, sim
    d = sim["devices"][0]
    cap = os.path.join(out, "win1.sbt")
    report = subprocess.run([TOOL, "report", cap], capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    section = report.stdout.split(f"# PCI {d['bdf']}")[1].split("\n# ")[0]
    for engine, key in (("H2D DMA", "h2d"), ("Compute", "compute"), ("D2H DMA", "d2h")):
        row = [ln.split() for ln in section.splitlines() if ln.strip().startswith(engine)]
        jobs = int(row[0][len(engine.split())]) if row else 0
        assert jobs == d[key], f"window: {d['bdf']} {engine}: {jobs} jobs, the simulator ran {d[key]}\n{report.stdout}"
    assert "unmatched" not in report.stdout or " 0 interrupts with no job" in report.stdout, report.stdout
    js = os.path.join(out, "win1.json")
    r = subprocess.run([TOOL, "convert", cap, "-o", js], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    jobs = [e for e in json.load(open(js))["traceEvents"]
            if e["ph"] == "X" and e["name"] in ("Memcpy (HtoD)", "Memcpy (DtoH)", "Compute")]
    assert len(jobs) == d["h2d"] + d["compute"] + d["d2h"], f"{len(jobs)} jobs in the window's trace"
    assert all(e["args"]["completed_by"] == "interrupt" for e in jobs), "a job in the window not ended by its interrupt"
    # the sampled device metrics: the window's jobs per card and engine
    m = parse_metrics(open(os.path.join(out, "metrics1w.txt")).read())
    for engine, key in (("h2d", "h2d"), ("compute", "compute"), ("d2h", "d2h")):
        got = m.get(("spyre_device_job_duration_seconds_count", frozenset({("card", d["bdf"]), ("engine", engine)})))
        assert got == d[key], f"spyre_device_job_duration_seconds_count{{card={d['bdf']},engine={engine}}} {got}, " \
            f"the simulator ran {d[key]}"
        busy = m.get(("spyre_device_busy_seconds_total", frozenset({("card", d["bdf"]), ("engine", engine)})))
        assert busy and 0 < busy <= 8, f"busy seconds of {engine}: {busy}"
    secs = m.get(("spyre_bpftrace_detail_window_seconds_total", frozenset()))
    assert secs and 7.5 <= secs <= 12, f"detail window seconds {secs}"
    # a window of one process driving two cards: each job on its card, as
    # record puts them (the daemon watches wake-ups while a window is open)
    assert open(os.path.join(out, "win2.txt")).read().startswith("ok /out/win2.sbt"), \
        open(os.path.join(out, "win2.txt")).read()
    two = json.load(open(os.path.join(out, "two1.json")))
    assert two["job_failures"] == 0 and len(two["devices"]) == 2, two
    check_jobs_on_cards(os.path.join(out, "win2.sbt"), two)
    # on fentry, the window read the woken threads from the interrupts'
    # eventfds: each wake-up names an interrupt of the window, at most one
    # a run of the handler (an interrupt before its thread waits wakes
    # nobody), and each card's interrupts woke its waiting thread
    log = open(os.path.join(out, "daemon1.log")).read()
    assert re.search(r"^  wake\s+-> fentry ", log, re.M), log[-3000:]
    events, _ = parse_dump(os.path.join(out, "win2.sbt"))
    runs = {(e["irq"], e["ts"] - int(e["dur_ns"])) for e in events if e["type"] == "irq"}
    woken = [(e["irq"], int(e["irq_start"].replace(".", ""))) for e in events if e["type"] == "wake" and e["hop"] == "0"]
    assert len(runs) == sum(d["irqs"] for d in two["devices"]), f"{len(runs)} interrupts in the window"
    assert woken and set(woken) <= runs and len(set(woken)) == len(woken), f"wake-ups {woken}, interrupts {runs}"
    assert len({irq for irq, _ in woken}) == 2, f"wake-ups by the interrupts of {set(i for i, _ in woken)} only"


def run_guest_daemon_no_syscall_tax(tmp):
    """In the x86 guest (vfio loaded, fentry there): the daemon counts VFIO
    ioctls in vfio's own handlers and loads no syscall tracepoint program
    (hook_info says fentry); the same daemon made to use the syscall
    tracepoints (--driver-probes off, the control) loads them. An unrelated
    process's getppid loop is timed beside each and alone, interleaved,
    each figure the fastest of three, and the medians printed: the
    emulator's noise (10-20%) is more than a 2% bound could tell."""
    start = ("build/spyre-bpftrace daemon --device 1234:11e8 --listen 127.0.0.1:9470 --no-recorder "
             "--state-dir /tmp/st --runtime-dir /tmp/rn {extra} 2>> /out/daemon.log & D=$!; "
             "for i in $(seq 120); do wget -q -O /dev/null http://127.0.0.1:9470/healthz && break; sleep 1; done; ")
    # each figure the fastest of three runs: a run the emulator slowed for
    # another reason (the daemon's start or exit, say) does not count
    loop = "for k in 1 2 3; do build/spyre-syscall-loop 100000; done | sort -n | head -1 >> /out/{}.txt; "
    cmd = "ip link set lo up; build/spyre-syscall-loop 200000 > /dev/null; "
    for _ in range(3):
        for name, extra in (("driver", ""), ("tracepoint", "--driver-probes off")):
            cmd += (loop.format("base") + start.format(extra=extra) + loop.format(name) +
                    f"wget -q -O /out/metrics-{name}.txt http://127.0.0.1:9470/metrics; kill $D; wait $D; "
                    # the kernel frees the daemon's programs after it exits: not in the next base run
                    "sleep 2; ")
    out, _ = run_in_guest(tmp, 1, cmd, 600)
    read = lambda n: [float(x) for x in open(os.path.join(out, n)).read().split()]
    base, driver, tp = read("base.txt"), read("driver.txt"), read("tracepoint.txt")
    assert len(base) == 6 and len(driver) == 3 and len(tp) == 3, (base, driver, tp)
    for name, hook in (("driver", "fentry"), ("tracepoint", "tracepoint")):
        m = parse_metrics(open(os.path.join(out, f"metrics-{name}.txt")).read())
        assert m.get(("spyre_bpftrace_hook_info", frozenset({("hook", "ioctl"), ("mechanism", hook)}))) == 1, \
            (name, [k for k in m if k[0] == "spyre_bpftrace_hook_info"])
    med = statistics.median
    r_driver, r_tp = med(driver) / med(base), med(tp) / med(base)
    print(f"     getppid in the guest: {med(base):.0f} ns alone, {r_driver:.3f}x beside the daemon on vfio's "
          f"handlers, {r_tp:.3f}x beside it on syscall tracepoints (medians of 6, 3, 3, each the "
          f"fastest of 3 runs)")
    # The emulator's timing moves by 10-20% from one run to the next (on
    # machine B, 2026-12-03: 0.74x to 1.31x beside the daemon on vfio's
    # handlers, 1.05x to 1.69x on the tracepoints), so the ratios are
    # printed, not bounded:
    # what the check holds is the cause, the syscall tracepoint programs
    # loaded (the control) or not.
    for name, progs in (("driver", set()), ("tracepoint", {"ioctl_enter", "ioctl_exit"})):
        m = parse_metrics(open(os.path.join(out, f"metrics-{name}.txt")).read())
        loaded = {dict(k[1])["program"] for k in m if k[0] == "spyre_bpftrace_bpf_runs_total"}
        assert loaded & {"ioctl_enter", "ioctl_exit"} == progs, (name, sorted(loaded))


def run_daemon_window(tmp):
    """ctl record: a detailed window asked of the running daemon records the
    processes that hold a card (runtime calls by uprobes and all), and no
    other: a process that loaded the runtime but holds no card is not
    traced. ctl snapshot: a job that ran and ended is in the flight
    recorder, every ioctl, with its manifest; a window from before it is
    empty of it. ctl status answers. The window's jobs are in the sampled
    device metrics, as many per engine as its trace has."""
    os.makedirs(os.path.join(tmp, "mock"))
    run_dir = os.path.join(tmp, "run")
    port = free_port()
    daemon = subprocess.Popen([TOOL, "daemon", "--listen", f"127.0.0.1:{port}", "--runtime-dir", run_dir,
                               "--state-dir", os.path.join(tmp, "state"), "--no-sampling", "--no-triggers",
                               "--vfio-path", tmp],
                              stderr=subprocess.PIPE, text=True)
    job = subprocess.Popen(shlex.split(long_sim(tmp)), stdout=subprocess.DEVNULL)
    idle = subprocess.Popen([SIM, "--mock-dir", os.path.join(tmp, "mock2"), "--wait-stdin", "--json",
                             os.path.join(tmp, "idle.json")], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    ctl = [TOOL, "ctl", "--runtime-dir", run_dir]
    try:
        wait_for(lambda: os.path.exists(os.path.join(run_dir, "control")), 20, "the control socket")
        assert oct(os.stat(os.path.join(run_dir, "control")).st_mode & 0o777) == "0o600"

        def job_seen():
            r = subprocess.run(ctl + ["status"], capture_output=True, text=True)
            return r.returncode == 0 and "processes with a card 1" in r.stdout
        wait_for(job_seen, 20, "the daemon to see the job")
        out = os.path.join(tmp, "window.sbt")
        r = subprocess.run(ctl + ["record", "--seconds", "2", "-o", out], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and r.stdout.startswith(f"ok {out}"), r.stdout + r.stderr
        events, _ = parse_dump(out)
        procs = {int(e["pid"]) for e in events if e["type"] == "process"}
        assert procs == {job.pid}, f"window traced {procs}, the job is {job.pid}, the idle one {idle.pid}"
        calls = [e for e in events if e["type"] == "call_enter" and e["tgid"] == job.pid]
        assert len(calls) > 50, f"{len(calls)} runtime calls of the job in a 2 s window"
        assert not [e for e in events if e["tgid"] == idle.pid], "the idle process was traced"
        # the sampled device metrics: the window's jobs (the mock has no
        # card: they are unattributed), and its seconds
        js = os.path.join(tmp, "window.json")
        r = subprocess.run([TOOL, "convert", out, "-o", js], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        names = {"Memcpy (HtoD)": "h2d", "Compute": "compute", "Memcpy (DtoH)": "d2h"}
        want_jobs = {}
        for e in json.load(open(js))["traceEvents"]:
            if e["ph"] == "X" and e["name"] in names:
                want_jobs[names[e["name"]]] = want_jobs.get(names[e["name"]], 0) + 1
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        got_jobs = {dict(k[1])["engine"]: int(v) for k, v in m.items()
                    if k[0] == "spyre_device_job_duration_seconds_count" and dict(k[1])["card"] == "unattributed"}
        assert want_jobs and got_jobs == want_jobs, f"sampled jobs {got_jobs}, the window's trace has {want_jobs}"
        assert 2 <= m[("spyre_bpftrace_detail_window_seconds_total", frozenset())] < 4, m
        # without -o: into the spool, its path in the answer
        r = subprocess.run(ctl + ["record", "--seconds", "1"], capture_output=True, text=True, timeout=60)
        spooled = r.stdout.split("\n")[0][3:]
        assert r.returncode == 0 and spooled.startswith(os.path.join(tmp, "state", "snapshots") + "/") and \
            "-window-" in spooled, r.stdout + r.stderr
        man = json.load(open(spooled + ".manifest.json"))
        assert man["reason"] == "window" and man["processes"] == [job.pid], man
        r = subprocess.run([TOOL, "inspect", spooled], capture_output=True, text=True)
        assert r.returncode == 0 and "slices" in r.stdout, r.stdout + r.stderr
        # the window closed: its uprobes went with it (removed on a thread
        # of the daemon's, said by ctl status), the kernel hooks stay
        wait_for(lambda: ctl_status(ctl)["window"] == "none", 60, "the window's uprobes to be removed")
        progs, links, perf = our_bpf_objects()
        uprobes = [p for p in perf if "uprobe" in p.get("fd_type", "")]
        assert progs and links and not uprobes, f"after the window: {len(links)} links, uprobes {uprobes}"
        # the flight recorder: a job that ran and ended, asked for afterwards
        t_before = time.time()
        short = subprocess.run([SIM, "--mock-dir", os.path.join(tmp, "mock3"), "--threads", "2", "--jobs", "3",
                                "--json", os.path.join(tmp, "short.json")], capture_output=True, timeout=60)
        assert short.returncode == 0
        want = json.load(open(os.path.join(tmp, "short.json")))
        for out in (os.path.join(tmp, "snap.sbt"), os.path.join(tmp, "snap.pftrace")):
            r = subprocess.run(ctl + ["snapshot", "--last", "30s", "-o", out], capture_output=True, text=True)
            assert r.returncode == 0 and r.stdout.startswith(f"ok {out}"), r.stdout + r.stderr
            assert oct(os.stat(out).st_mode & 0o777) == "0o600"
            man = json.load(open(out + ".manifest.json"))
            assert want["pid"] in man["processes"] and man["lost_records"] == 0, man
            assert man["window"]["to_realtime_ns"] - man["window"]["from_realtime_ns"] == 30 * 10**9, man
        r = subprocess.run([TOOL, "inspect", os.path.join(tmp, "snap.pftrace")], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout
        events, _ = parse_dump(os.path.join(tmp, "snap.sbt"), outputs=False)
        got = [(e["tid"], e["cmd"]) for e in events if e["type"] == "ioctl" and e["tgid"] == want["pid"]]
        assert got == [(i["tid"], i["cmd"]) for i in want["ioctls"]] or \
            sorted(got) == sorted((i["tid"], i["cmd"]) for i in want["ioctls"]), \
            f"snapshot holds {len(got)} ioctls of the job, it made {len(want['ioctls'])}"
        # an absolute window from before the job holds none of it
        old = os.path.join(tmp, "old.sbt")
        r = subprocess.run(ctl + ["snapshot", "--from", f"{t_before - 3600:.3f}", "--to", f"{t_before - 1:.3f}",
                                  "-o", old], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert not [e for e in parse_dump(old, outputs=False)[0] if e["tgid"] == want["pid"]]
        r = subprocess.run(ctl + ["snapshot"], capture_output=True, text=True)
        assert r.returncode == 2 and "--last DURATION" in r.stderr, r.stderr
        r = subprocess.run([TOOL, "ctl", "--runtime-dir", os.path.join(tmp, "nothing"), "status"],
                           capture_output=True, text=True)
        assert r.returncode == 1 and "no daemon at" in r.stderr and "hint" in r.stderr, r.stderr
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=20)
        assert daemon.returncode == 0 and "window (request): 2.000 s of 1 process" in err, err
        assert not os.path.exists(os.path.join(run_dir, "control")), "control socket left behind"
    finally:
        for p in (daemon, job, idle):
            if p.poll() is None:
                p.kill()
                p.wait()


def short_jobs(tmp, tag, n, launcher=None):
    """n short simulator jobs one after another (2 threads, 30 jobs each),
    by spyre-sim-run or the launcher given; their JSON summaries."""
    sims = []
    for i in range(n):
        js = os.path.join(tmp, f"{tag}{i}.json")
        r = subprocess.run([*(launcher or (SIM,)), "--mock-dir", os.path.join(tmp, f"{tag}-mock{i}"),
                            "--threads", "2", "--jobs", "30", "--json", js],
                           stdout=subprocess.DEVNULL, timeout=120)
        assert r.returncode == 0, f"short job {i} failed"
        sims.append(json.load(open(js)))
    return sims


def window_of(man):
    """The one detail window of a window snapshot's manifest, its processes by pid."""
    wins = [w for w in man["detail_windows"] if w["reason"] == "request"]
    assert len(wins) == 1, man["detail_windows"]
    return wins[0], {t["pid"]: t for t in wins[0]["traced"]}


def check_in_time_order(events):
    """The daemon's kernel records in the order things happened (its
    recorder takes them through the reorder step, as record does): their
    times never go back. Descriptions the daemon writes itself are not
    checked."""
    ts = [e["ts"] for e in events if e["type"] in ("call_enter", "call_exit", "ioctl")]
    back = [i for i in range(1, len(ts)) if ts[i] < ts[i - 1]]
    assert not back, f"{len(back)} of {len(ts)} records out of time order, the first: {ts[back[0] - 1]} then {ts[back[0]]}"


def record_window_during(ctl, out, seconds, during):
    """ctl record of seconds to out; during() runs once the window is open.
    Returns what during() returned and the manifest."""
    rec = subprocess.Popen(ctl + ["record", "--seconds", f"{seconds:.1f}", "-o", out], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: ctl_status(ctl)["window"].startswith("request"), 20, "the window to open")
        # a process's start is known to the clock tick (10 ms): one that
        # starts later than that after the probes went on is surely whole
        time.sleep(0.05)
        got = during()
        o, e = rec.communicate(timeout=seconds + 60)
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    assert rec.returncode == 0 and o.startswith(f"ok {out}"), o + e
    return got, json.load(open(out + ".manifest.json"))


def run_daemon_window_newcomers(tmp):
    """Short jobs that start inside a detail window are traced from their
    first call: every runtime call the simulator logged is in the window's
    capture, with the process's name, whether a long job held a card when
    the window opened or none did. A process that calls the runtime but
    never takes a card is left out of the snapshot, and said so. A runtime
    file the daemon has not read yet: its first job may miss calls, and
    the manifest says for how long; the next job of it has them all.
    Between windows no uprobe is left."""
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers", "-v")
    long_job = idle = None
    try:
        # how long a short job takes here: the windows are sized from it
        t0 = time.time()
        short_jobs(tmp, "probe", 1)
        job_s = time.time() - t0
        seconds = 4 + 6 * job_s * 3
        long_job = subprocess.Popen(sim_cmd(tmp, "--jobs", "1000000", "--delay-us", "2000"),
                                    stdout=subprocess.DEVNULL)
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 1", 20, "the daemon to see the long job")

        def check(out, sims, man, first_complete=True):
            events, _ = parse_dump(out)
            check_in_time_order(events)
            win, traced = window_of(man)
            names = {e["pid"]: e.get("comm") for e in events if e["type"] == "process"}
            for k, sim in enumerate(sims):
                pid = sim["pid"]
                calls = [e for e in events if e["type"] in ("call_enter", "call_exit") and e["tgid"] == pid]
                assert str(pid) in names, f"job {k} (PID {pid}) has no name in the capture"
                assert pid in traced, f"job {k} (PID {pid}) not in the window's manifest: {win}"
                if k or first_complete:
                    check_calls_match_sim(calls, sim)
                    assert traced[pid]["calls_may_be_missing_ns"] == 0, traced[pid]
            return win, traced

        # 1. a long job holds a card as the window opens; six short ones come
        out = os.path.join(tmp, "with-long.sbt")
        sims, man = record_window_during(ctl, out, seconds, lambda: short_jobs(tmp, "a", 6))
        win, traced = check(out, sims, man)
        assert traced[long_job.pid]["joined"] == "at_open" and win["joined"] >= 6, win
        long_job.kill()
        long_job.wait()
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 0", 30, "the long job to be forgotten")

        # 2. nobody holds a card at the request; a tool calls the runtime
        #    all along and never takes a card
        def during():
            nonlocal idle
            idle = subprocess.Popen([SIM, "--no-card", "--jobs", "100000", "--delay-us", "1000"])
            return short_jobs(tmp, "b", 6)
        out = os.path.join(tmp, "no-long.sbt")
        sims, man = record_window_during(ctl, out, seconds, during)
        check(out, sims, man)
        events, _ = parse_dump(out, outputs=False)
        assert not [e for e in events if e["tgid"] == idle.pid], "the process without a card is in the snapshot"
        assert idle.pid in man["left_out"]["processes"] and man["left_out"]["records"] > 0, man["left_out"]
        idle.kill()
        idle.wait()

        # 3. a copy of the runtime the daemon never read: its first job is
        #    found at its first VFIO ioctl and may miss calls, said so; once
        #    the copy is read, the next job has them all
        lib = hidden_runtime(tmp, ("copy",))
        launcher = (os.path.join(BUILD, "spyre-sim-dlopen"), lib)
        copy_flex = os.path.join(os.path.dirname(lib), "libflex.so")

        def new_library():
            sims = short_jobs(tmp, "c", 1, launcher)
            wait_for(lambda: f"library    -> {copy_flex}" in open(os.path.join(tmp, "daemon.log")).read(),
                     20, "the daemon to read the new copy")
            time.sleep(0.5)  # its probes go on just after
            return sims + short_jobs(tmp, "d", 2, launcher)
        out = os.path.join(tmp, "new-lib.sbt")
        sims, man = record_window_during(ctl, out, seconds, new_library)
        win, traced = check(out, sims, man, first_complete=False)
        first = traced[sims[0]["pid"]]
        assert first["joined"] == "card" and first["calls_may_be_missing_ns"] > 0, first
        events, _ = parse_dump(out, outputs=False)
        check_calls_match_sim([e for e in events if e["type"] in ("call_enter", "call_exit")
                               and e["tgid"] == sims[0]["pid"]], sims[0], partial=True)

        # 4. an empty window is an answer; no uprobe is left between windows
        out = os.path.join(tmp, "empty.sbt")
        r = subprocess.run(ctl + ["record", "--seconds", "1", "-o", out], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and r.stdout.startswith(f"ok {out}") and "nothing happened" in r.stdout, \
            r.stdout + r.stderr
        assert window_of(json.load(open(out + ".manifest.json")))[0]["processes"] == 0
        assert_no_uprobes_between_windows(port)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=20) == 0
        log = open(os.path.join(tmp, "daemon.log")).read()
        assert "6 of them joined while it was open" in log, log[-3000:]
    finally:
        for p in (daemon, long_job, idle):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def run_daemon_window_container_root(tmp):
    """A job in a mount namespace of its own (as a container's), whose
    runtime lies at a path that on the host is a FIFO named libflex.so: the
    daemon reads the runtime the job really mapped (/proc/PID/map_files)
    and its LD_LIBRARY_PATH inside its root, never the host's file of that
    name (which it would have hung on, or refused, and traced nothing). The
    first job, found at its first VFIO ioctl, is traced from then on; the
    second, in the same window, whole: every call the simulator logged,
    through uprobes on the file the daemon holds open."""
    if not shutil.which("unshare"):
        raise Skip("no unshare")
    decoy, real = os.path.join(tmp, "decoy"), os.path.join(tmp, "real")
    os.makedirs(decoy)
    os.makedirs(real)
    for n in ("libflex.so", "libsenlib.so"):
        os.mkfifo(os.path.join(decoy, n))
        shutil.copy(os.path.join(BUILD, "sim", n), real)
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers", "-v")
    try:
        def jobs():
            sims = []
            for i in range(2):
                js = os.path.join(tmp, f"s{i}.json")
                # the first runs long enough for the daemon to read its
                # runtime while it runs, on a loaded machine too
                job = " ".join(shlex.quote(x) for x in [SIM, "--mock-dir", os.path.join(tmp, f"m{i}"), "--threads",
                                                         "2", "--jobs", "400" if i == 0 else "30", "--json", js])
                r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                    f"mount --bind {shlex.quote(real)} {shlex.quote(decoy)} && exec {job}"],
                                   stdout=subprocess.DEVNULL, env=dict(os.environ, LD_LIBRARY_PATH=decoy), timeout=120)
                assert r.returncode == 0, f"job {i} in its namespace failed"
                sims.append(json.load(open(js)))
                if i == 0:
                    wait_for(lambda: f"library    -> {decoy}/libflex.so" in open(os.path.join(tmp, "daemon.log")).read(),
                             20, "the daemon to read the job's runtime")
                    time.sleep(0.5)  # its probes go on just after
            return sims
        out = os.path.join(tmp, "ns.sbt")
        sims, man = record_window_during(ctl, out, 6, jobs)
        events, _ = parse_dump(out, outputs=False)
        win, traced = window_of(man)
        for k, sim in enumerate(sims):
            assert sim["pid"] in traced, f"job {k} (PID {sim['pid']}) not in the window: {win}"
        calls = lambda sim: [e for e in events if e["type"] in ("call_enter", "call_exit") and e["tgid"] == sim["pid"]]
        check_calls_match_sim(calls(sims[0]), sims[0], partial=True)
        assert traced[sims[1]["pid"]]["calls_may_be_missing_ns"] == 0, traced[sims[1]["pid"]]
        check_calls_match_sim(calls(sims[1]), sims[1])
        log = open(os.path.join(tmp, "daemon.log")).read()
        assert "not a regular file" not in log, log[-3000:]
        print(f"  job 1: {len(calls(sims[1])) // 2} calls, all the simulator's, from the runtime of its own namespace")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=20) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


def daemon_up(tmp, *args):
    """A daemon with its control socket and state in tmp, the simulator's
    mock files below tmp counted as VFIO files; (process, ctl argv, port)."""
    run_dir, port = os.path.join(tmp, "run"), free_port()
    daemon = subprocess.Popen([TOOL, "daemon", "--listen", f"127.0.0.1:{port}", "--runtime-dir", run_dir,
                               "--state-dir", os.path.join(tmp, "state"), "--vfio-path", tmp, *args],
                              stderr=open(os.path.join(tmp, "daemon.log"), "w"))
    try:
        wait_for(lambda: os.path.exists(os.path.join(run_dir, "control")), 20, "the control socket")
    except AssertionError:
        daemon.kill()
        raise AssertionError("daemon did not start: " + open(os.path.join(tmp, "daemon.log")).read())
    return daemon, [TOOL, "ctl", "--runtime-dir", run_dir], port


def daemon_stuck(daemon, tmp):
    """Where a daemon that does not answer is: each thread's kernel stack
    and, where gdb is installed, its user stack; the end of its log."""
    out = []
    for t in sorted(os.listdir(f"/proc/{daemon.pid}/task")):
        try:
            comm = open(f"/proc/{daemon.pid}/task/{t}/comm").read().strip()
            out.append(f"thread {t} ({comm}):\n" + open(f"/proc/{daemon.pid}/task/{t}/stack").read())
        except OSError:
            pass
    if shutil.which("gdb"):
        r = subprocess.run(["gdb", "-p", str(daemon.pid), "-batch", "-ex", "thread apply all bt"],
                           capture_output=True, text=True, timeout=120)
        out.append(r.stdout[-6000:])
    return "\n".join(out) + "\nits log: " + open(os.path.join(tmp, "daemon.log")).read()[-2000:]


def ctl_status(ctl):
    r = subprocess.run(ctl + ["status"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return dict(line.split(" ", 1) if " " in line else (line, "") for line in r.stdout.splitlines()[1:])


def spool_files(tmp):
    """The spool's snapshots and manifests; not the one being written (a
    dot file until it takes its name, bounded by --spool-mib alone)."""
    d = os.path.join(tmp, "state", "snapshots")
    return sorted(os.path.join(d, f) for f in os.listdir(d) if not f.startswith(".")) if os.path.isdir(d) else []


def assert_no_uprobes_between_windows(port):
    """Between two windows (none open before and after the look, none
    opened meanwhile, and the last one's uprobes said removed), no uprobe
    of ours is in the kernel."""
    def windows():
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        return (m[("spyre_bpftrace_detail_window_open", frozenset())],
                m[("spyre_bpftrace_uprobes_being_removed", frozenset())],
                sum(v for k, v in m.items() if k[0] == "spyre_bpftrace_detail_windows_total"))
    end = time.time() + 60
    while time.time() < end:
        before = windows()
        uprobes = [p for p in our_bpf_objects()[2] if "uprobe" in p.get("fd_type", "")]
        if before[0] == 0 and before[1] == 0 and windows() == before:
            assert not uprobes, f"uprobes left between windows: {uprobes}"
            return
        time.sleep(0.1)
    raise AssertionError("never between two windows")


def run_daemon_sampling_triggers(tmp):
    """Detail windows the daemon opens on its own. A trigger (the mock
    card's setup ioctls all fail): a window on the job, then a snapshot in
    the spool holding those failed ioctls (from before the trigger) and the
    job's runtime calls (from the window), its manifest saying why. Sampled
    windows come at random once per period, at most, and their calls are in
    a later snapshot with their sampling weight. Between windows no uprobe
    is left; the metrics count windows and snapshots."""
    os.makedirs(os.path.join(tmp, "mock"))
    daemon, ctl, port = daemon_up(tmp, "--sample-every", "3s", "--window-seconds", "1",
                                  "--trigger-errors", "1", "--trigger-slow", "0", "--trigger-every", "1h",
                                  "--trigger-before", "20s")
    job = subprocess.Popen(shlex.split(long_sim(tmp)), stdout=subprocess.DEVNULL)
    t_start = time.time()
    try:
        wait_for(lambda: [f for f in spool_files(tmp) if "-errors-" in f and f.endswith(".manifest.json")],
                 30, "the trigger's snapshot")
        trace = [f for f in spool_files(tmp) if "-errors-" in f and f.endswith(".pftrace")]
        assert len(trace) == 1, spool_files(tmp)
        man = json.load(open(trace[0] + ".manifest.json"))
        assert man["reason"] == "errors" and job.pid in man["processes"], man
        # its window: the trigger's own, or a sample it fell into
        assert man["detail_windows"], man
        assert oct(os.stat(trace[0]).st_mode & 0o777) == "0o600"
        r = subprocess.run([TOOL, "inspect", trace[0]], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        # the same window as a capture: the failed setup ioctls and the calls
        t0 = man["window"]["from_realtime_ns"] / 1e9
        t1 = man["window"]["to_realtime_ns"] / 1e9
        cap = os.path.join(tmp, "trig.sbt")
        r = subprocess.run(ctl + ["snapshot", "--from", f"{t0:.3f}", "--to", f"{t1:.3f}", "-o", cap],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        events, _ = parse_dump(cap, outputs=False)
        failed = [e for e in events if e["type"] == "ioctl" and e["tgid"] == job.pid and int(e["ret"]) < 0]
        calls = [e for e in events if e["type"] == "call_enter" and e["tgid"] == job.pid]
        assert failed and calls, f"{len(failed)} failed ioctls, {len(calls)} calls in the trigger's window"
        # sampled windows: at most one a period, each closed with its uprobes
        time.sleep(7)
        st = ctl_status(ctl)
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        samples = m[("spyre_bpftrace_detail_windows_total", frozenset({("reason", "sample")}))]
        assert 1 <= samples <= (time.time() - t_start) / 3 + 1, (samples, st)
        assert m[("spyre_bpftrace_snapshots_total", frozenset({("reason", "errors")}))] == 1, st
        assert "errors 1," in st["triggers"] and "held back as too soon: " in st["triggers"], st
        assert_no_uprobes_between_windows(port)
        out = os.path.join(tmp, "later.json")
        r = subprocess.run(ctl + ["snapshot", "--last", "8s", "-o", out], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        man = json.load(open(out + ".manifest.json"))
        sampled = [w for w in man["detail_windows"] if w["reason"] == "sample"]
        assert sampled and all(w["sampling_weight"] == 3 for w in sampled), man["detail_windows"]
        check_meta_names(json.load(open(out)))
        names = {e.get("name") for e in json.load(open(out))["traceEvents"]}
        assert names & {"senlib::ControlBlockInterface::QueueControlBlocksSBF"}, "no runtime call sampled"
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=20) == 0
        log = open(os.path.join(tmp, "daemon.log")).read()
        assert "trigger errors:" in log and "window (sample)" in log and "snapshot (errors)" in log, log
    finally:
        for p in (daemon, job):
            if p.poll() is None:
                p.kill()
                p.wait()


def raw_request(run_dir, line, as_uid=None):
    """One request line on the control socket, as root or another uid."""
    import socket
    pid = os.fork() if as_uid is not None else 0
    if pid:
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
    try:
        if as_uid is not None:
            os.setgid(as_uid)
            os.setuid(as_uid)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as so:
            so.settimeout(10)
            so.connect(os.path.join(run_dir, "control"))
            try:
                so.sendall(line.encode())
            except BrokenPipeError:  # refused at once: the answer says why
                pass
            answer = b""
            while chunk := so.recv(4096):
                answer += chunk
        if as_uid is None:
            return answer.decode()
        os._exit(0 if answer.startswith(b"error: not allowed; hint:") else 3)
    except Exception:  # noqa: BLE001 - the child tells by its exit code
        if as_uid is None:
            raise
        os._exit(4)


def run_daemon_bad_requests(tmp):
    """Bad control requests get one error line with a hint, and the daemon
    goes on: an unknown request, a peer of another uid, windows too long, a
    spool on a full disk (an 8 KiB tmpfs) and a spool over its bound.
    Then SIGKILL in the middle of a detail window leaves no BPF program,
    link or uprobe."""
    os.makedirs(os.path.join(tmp, "mock"))
    full = os.path.join(tmp, "state")
    os.makedirs(full)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k,mode=0700", "tmpfs", full], check=True)
    daemon = job = None
    try:
        wait_for(lambda: not our_bpf_objects()[0], 10, "programs of earlier runs to go away")
        daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers", "--spool-mib", "1")
        run_dir = os.path.join(tmp, "run")
        job = subprocess.Popen(shlex.split(long_sim(tmp)), stdout=subprocess.DEVNULL)
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 1", 20, "the daemon to see the job")
        for line, want in (("frobnicate\n", "error: unknown request; hint:"),
                           ("record 100000 -\n", "error: a window is 0.1 to 3600 s; hint:"),
                           (f"snapshot 1 {time.time_ns()} -\n", "error: a snapshot is at most 24 h; hint:"),
                           ("snapshot 5 1 -\n", "error: unknown request; hint:"),
                           ("no newline", "error: no request line; hint:")):
            answer = raw_request(run_dir, line)
            assert answer.startswith(want), (line, answer)
        os.chmod(os.path.join(run_dir, "control"), 0o666)
        os.chmod(run_dir, 0o755)
        os.chmod(tmp, 0o755)
        rc = raw_request(run_dir, "status\n", as_uid=65534)
        assert rc == 0, f"a peer of another uid was not refused (child {rc})"
        os.chmod(run_dir, 0o700)
        os.chmod(tmp, 0o700)
        # a client that dribbles its request holds the daemon for one
        # second in all, not a read timeout per byte: it is cut off, and
        # ctl status asked meanwhile is answered
        import socket
        import threading
        slow_answer = []

        def dribble():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as so:
                so.settimeout(10)
                so.connect(os.path.join(run_dir, "control"))
                try:
                    for ch in b"status":
                        so.sendall(bytes([ch]))
                        time.sleep(0.5)
                except OSError:
                    pass  # cut off
                slow_answer.append(so.recv(4096))
        t = threading.Thread(target=dribble)
        t.start()
        time.sleep(0.2)
        t0 = time.time()
        st = ctl_status(ctl)
        waited = time.time() - t0
        t.join(timeout=20)
        assert st["version"] and slow_answer and slow_answer[0].startswith(b"error: no request line"), slow_answer
        # 1 s for the dribbler, then ours: room for a machine 3x slower
        assert waited < 4, f"ctl status waited {waited:.1f} s behind a dribbling client"
        r = subprocess.run(ctl + ["record", "--seconds", "5000"], capture_output=True, text=True)
        assert r.returncode == 2 and "invalid --seconds" in r.stderr, r.stderr
        # the spool's disk fills: an error, counted; nothing half-written stays
        time.sleep(3)
        r = subprocess.run(ctl + ["snapshot", "--last", "60s"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "No space left on device" in r.stderr, r.stdout + r.stderr
        left = os.listdir(os.path.join(full, "snapshots"))
        assert not left, f"a failed snapshot left {left}"
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        assert m[("spyre_bpftrace_snapshot_failures_total", frozenset())] >= 1
        # room again: snapshots fit, and the spool keeps under --spool-mib 1
        subprocess.run(["umount", full], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", full], check=True)
        os.makedirs(os.path.join(full, "snapshots"), mode=0o700)
        for _ in range(6):
            r = subprocess.run(ctl + ["snapshot", "--last", "2s"], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            used = sum(os.path.getsize(f) for f in spool_files(tmp))
            assert used <= 1 << 20, f"spool at {used} bytes, over --spool-mib 1"
        assert ctl_status(ctl)["snapshots"].startswith("written 6,"), ctl_status(ctl)
        # a path is carried whole, spaces and all; one the protocol cannot
        # carry is refused by ctl
        spaced = os.path.join(tmp, "a b.sbt IGNORED.pftrace")
        r = subprocess.run(ctl + ["snapshot", "--last", "2s", "-o", spaced], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and r.stdout.startswith(f"ok {spaced}\n") and os.path.exists(spaced), \
            r.stdout + r.stderr
        assert not os.path.exists(os.path.join(tmp, "a")), "the path was cut at its space"
        r = subprocess.run(ctl + ["snapshot", "--last", "2s", "-o", os.path.join(tmp, "a\nb.sbt")],
                           capture_output=True, text=True)
        assert r.returncode == 2 and "control character" in r.stderr, r.stderr
        # SIGKILL in a window: the kernel drops every program, link and uprobe
        rec = subprocess.Popen(ctl + ["record", "--seconds", "30"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        wait_for(lambda: [p for p in our_bpf_objects()[2] if "uprobe" in p.get("fd_type", "")], 20,
                 "the window's uprobes")
        daemon.kill()
        daemon.wait()
        rec.wait(timeout=10)
        wait_for(lambda: our_bpf_objects() == (set(), [], []), 10,
                 "the daemon's BPF programs, links and uprobes to go away")
    finally:
        for p in (daemon, job):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        subprocess.run(["umount", full], capture_output=True)


def bpf_progs():
    """The host's loaded BPF programs, by id: (name, run_time_ns, run_cnt);
    the kernel counts the last two only while its statistics are on."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout
    return {p["id"]: (p.get("name", ""), p.get("run_time_ns", 0), p.get("run_cnt", 0)) for p in json.loads(out)}


def run_daemon_cost_on_demand(tmp):
    """The daemon keeps the kernel's BPF statistics off, so no other BPF
    program of the host pays their 40-50 ns a run because of it: bpftrace's
    own getppid program, beside the daemon and a job making VFIO ioctls,
    counts no run time. `ctl cost --seconds 2` turns them on for two
    seconds: the daemon's ioctl programs' runs and ns per run come back,
    the metrics say they were counted meanwhile, bpftrace's program paid
    then (the control: this test sees the tax), and not after; the sysctl
    is as it was."""
    if not shutil.which("bpftool"):
        raise Skip("no bpftool")
    sysctl = "/proc/sys/kernel/bpf_stats_enabled"
    before = open(sysctl).read().strip()
    loop = os.path.join(BUILD, "spyre-syscall-loop")
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers")
    job = other = None
    try:
        known = set(bpf_progs())
        other = subprocess.Popen(["bpftrace", "-e", "tracepoint:syscalls:sys_enter_getppid { @ = count(); }"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert "Attaching" in other.stdout.readline(), "bpftrace did not start"
        wait_for(lambda: [i for i, p in bpf_progs().items() if i not in known and p[0].startswith("sys_enter_getpp")],
                 10, "bpftrace's program")
        mine = [i for i, p in bpf_progs().items() if i not in known and p[0].startswith("sys_enter_getpp")][0]
        os.makedirs(os.path.join(tmp, "mock"), exist_ok=True)
        job = subprocess.Popen(sim_cmd(tmp, "--jobs", "1000000", "--delay-us", "1000"), stdout=subprocess.DEVNULL)
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 1", 20, "the daemon to see the job")
        subprocess.run([loop, "200000"], check=True, capture_output=True)
        idle = bpf_progs()[mine]
        print(f"     beside the daemon: bpftrace's program {idle[1]} ns in {idle[2]} runs counted")
        if before == "0":
            assert idle[1] == 0 and idle[2] == 0, f"another program paid for statistics: {idle}"
        st = ctl_status(ctl)
        assert st["bpf"].startswith("cost not measured"), st
        cost = subprocess.Popen(ctl + ["cost", "--seconds", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(0.5)
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        assert m[("spyre_bpftrace_bpf_stats_enabled", frozenset())] == 1, "metrics say not measured meanwhile"
        subprocess.run([loop, "100000"], check=True, capture_output=True)
        out, err = cost.communicate(timeout=60)
        assert cost.returncode == 0 and out.startswith("ok\n"), out + err
        rows = {w[0]: w for w in (line.split() for line in out.splitlines()[3:]) if len(w) == 4}
        print("     " + "\n     ".join(out.splitlines()[1:4] + out.splitlines()[-1:]))
        assert int(rows["ioctl_enter"][1]) > 0 and int(rows["ioctl_enter"][2]) > 0, rows
        assert int(rows["all"][1]) >= int(rows["ioctl_enter"][1]), rows
        paid = bpf_progs()[mine]
        assert paid[1] > idle[1] and paid[2] > idle[2], f"bpftrace's program not counted during ctl cost: {paid}"
        subprocess.run([loop, "200000"], check=True, capture_output=True)
        after = bpf_progs()[mine]
        if before == "0":
            assert after[1:] == paid[1:], f"statistics left on after ctl cost: {paid} then {after}"
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        assert m[("spyre_bpftrace_bpf_stats_enabled", frozenset())] == (before != "0"), m
        assert ctl_status(ctl)["bpf"].startswith("cost measured last:")
        assert open(sysctl).read().strip() == before
    finally:
        for p in (job, other):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        daemon.kill()
        daemon.wait()


def run_daemon_soak(tmp):
    """A soak at the highest event rate the simulators make here (no delay
    between jobs: SBT_SOAK_DELAY_US to slow them): detail windows every few
    seconds, a snapshot every two, for SBT_SOAK_SECONDS (60 by default). The
    daemon's resident memory stays under the 64 MiB goal and the recorder
    within its bound, the spool under --spool-mib, and no record is lost.
    However many records a second a snapshot holds on this machine, it is
    written: one over the spool's bound alone keeps its newest part, says
    so in its manifest, and is counted."""
    os.makedirs(os.path.join(tmp, "mock"))
    seconds = float(os.environ.get("SBT_SOAK_SECONDS", "60"))
    delay = os.environ.get("SBT_SOAK_DELAY_US", "0")
    spool_mib = 4
    daemon, ctl, port = daemon_up(tmp, "--sample-every", "4s", "--window-seconds", "2", "--recorder-mib", "8",
                                  "--recorder-seconds", "20", "--spool-mib", str(spool_mib), "--trigger-errors", "1",
                                  "--trigger-every", "10s")
    jobs = []
    try:
        for i in range(2):
            jobs.append(subprocess.Popen([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--threads", "4",
                                          "--jobs", "100000000", "--delay-us", delay,
                                          "--json", os.path.join(tmp, f"soak{i}.json")], stdout=subprocess.DEVNULL))
        end, rss, spool, snaps, busy, cut = time.time() + seconds, 0, 0, 0, 0, set()
        worst = 0.0
        while time.time() < end:
            # the main loop answers throughout, within 30 s: a window's
            # library search is on its own thread (it once sat here on
            # `ldconfig -p`, starved by the simulators, for over 30 s), and
            # so is the removal of a closed window's uprobes (up to 131 s
            # here for 26, which held the main loop before)
            t = time.time()
            try:
                subprocess.run(ctl + ["status"], capture_output=True, text=True, timeout=30, check=True)
            except subprocess.TimeoutExpired:
                raise AssertionError("ctl status got no answer in 30 s: " + daemon_stuck(daemon, tmp))
            worst = max(worst, time.time() - t)
            r = subprocess.run(ctl + ["snapshot", "--last", "1s"], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0 or "busy" in r.stderr, r.stdout + r.stderr
            snaps += r.returncode == 0
            busy += r.returncode != 0
            status = open(f"/proc/{daemon.pid}/status").read()
            rss = max(rss, int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) * 1024)
            spool = max(spool, sum(os.path.getsize(f) for f in spool_files(tmp)))
            for man in [f for f in spool_files(tmp) if f.endswith(".manifest.json")]:
                try:
                    m = json.load(open(man))
                    size = os.path.getsize(m["trace"]) + os.path.getsize(man)
                except (OSError, ValueError):
                    continue  # trimmed away meanwhile
                assert size <= spool_mib << 20, f"{m['trace']}: {size} bytes, over --spool-mib {spool_mib}"
                if m["cut_to_fit"]:
                    k, w = m["kept"], m["window"]
                    assert w["from_boottime_ns"] <= k["from_boottime_ns"] <= k["to_boottime_ns"] == \
                        w["to_boottime_ns"] and m["records"] < m["records_in_window"], m
                    cut.add(man)
            time.sleep(2)
        # its BPF's runs under this load, by the kernel's count, asked for
        # (the statistics are off otherwise)
        r = subprocess.run(ctl + ["cost", "--seconds", "3"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("ok\n"), r.stdout + r.stderr
        runs, share = [(int(w[1]), w[3]) for w in (line.split() for line in r.stdout.splitlines()) if w[0] == "all"][0]
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        peak, ring = m[("spyre_bpftrace_ring_buffer_peak_bytes", frozenset())], \
            m[("spyre_bpftrace_ring_buffer_bytes", frozenset())]
        print(f"     soak {seconds:.0f} s, --delay-us {delay}: {runs / 3:.0f} BPF program runs/s ({share} of a core), "
              f"{snaps} snapshots written of {snaps + busy} asked ({len(cut)} seen cut to fit), "
              f"{int(m[('spyre_bpftrace_detail_windows_total', frozenset({('reason', 'sample')}))])} sampled windows, "
              f"max RSS {rss / 2**20:.1f} MiB, max spool {spool / 2**20:.2f} MiB, "
              f"recorder {m[('spyre_bpftrace_recorder_bytes', frozenset())] / 2**20:.0f} MiB, "
              f"ring buffer at most {peak / 2**20:.2f} of {ring / 2**20:.0f} MiB in use, "
              f"ctl status answered in at most {worst:.1f} s")
        # the drainer outweighs the simulators' threads (nice -10: root has CAP_SYS_NICE)
        nices = [int(open(f"/proc/{daemon.pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[16])
                 for t in os.listdir(f"/proc/{daemon.pid}/task")]
        assert -10 in nices, f"no daemon thread at nice -10: {nices}"
        assert 0 < peak <= ring
        # written by a lowest-priority thread (the daemon's while others
        # wait) while two simulators run flat out on every core: slow (up
        # to 15 s each seen, so no count of them is asked for), but every
        # request answered; a trigger's snapshot waits for room rather
        # than being dropped, so the only failures are busy answers
        assert snaps >= 1, f"no snapshot written in {seconds} s ({busy} busy)"
        assert m[("spyre_bpftrace_snapshot_failures_total", frozenset())] <= busy, "a snapshot failed: " + \
            " | ".join(l.strip() for l in open(os.path.join(tmp, "daemon.log")) if "snapshot" in l)[-3000:]
        assert m[("spyre_bpftrace_snapshots_cut_total", frozenset())] >= len(cut)
        assert rss <= 64 << 20, f"daemon RSS reached {rss / 2**20:.1f} MiB"
        assert m[("spyre_bpftrace_recorder_bytes", frozenset())] <= 8 << 20
        assert spool <= spool_mib << 20, f"spool reached {spool} bytes"
        lost = m[("spyre_bpftrace_lost_records_total", frozenset())]
        assert lost == 0, f"{lost:.0f} records lost; the daemon said: " + \
            " | ".join(l.strip() for l in open(os.path.join(tmp, "daemon.log")) if "lost" in l or "window" in l)[-3000:]
        # stopped with the simulators still flat out and snapshots queued:
        # those are written first, within Kubernetes' default grace of 30 s
        try:
            queued = ctl_status(ctl)["snapshots"]
        except subprocess.TimeoutExpired:
            raise AssertionError("ctl status got no answer in 30 s: " + daemon_stuck(daemon, tmp))
        # everything is written within the grace; what may follow is the
        # kernel removing the last window's uprobes, which waits for its
        # grace periods (up to two minutes seen on this host flat out)
        t = time.time()
        daemon.send_signal(signal.SIGTERM)
        log = os.path.join(tmp, "daemon.log")
        written = lambda: daemon.poll() is not None or "everything written" in open(log).read()
        try:
            wait_for(written, 30, "the daemon to write everything after SIGTERM")
        except AssertionError:
            raise AssertionError(f"the daemon did not stop in 30 s ({queued}): " + daemon_stuck(daemon, tmp))
        t_written = time.time() - t
        try:
            rc = daemon.wait(timeout=300)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the daemon did not exit in 300 s ({queued}): " + daemon_stuck(daemon, tmp))
        print(f"     stopped in {time.time() - t:.1f} s, everything written in {t_written:.1f} s ({queued})")
        assert rc == 0
    finally:
        for p in [daemon, *jobs]:
            if p.poll() is None:
                p.kill()
                p.wait()


FREEZER = "/sys/fs/cgroup/freezer"


def daemon_thread(daemon, name):
    """The TID of the daemon's thread of that name (top -H shows it)."""
    found = []

    def look():
        found[:] = [int(t) for t in os.listdir(f"/proc/{daemon.pid}/task")
                    if open(f"/proc/{daemon.pid}/task/{t}/comm").read().strip() == name]
        return found
    wait_for(look, 10, f"a thread {name} in the daemon")
    return found[0]


def trigger_waits_for_room(tmp, stop_first):
    """A trigger whose snapshot comes while four wait to be written: the
    snapshot writer frozen (cgroup v1 freezer, that thread alone) with four
    requests queued and a fifth refused as busy, the failed setup ioctls of
    a job fire the errors trigger; its snapshot waits for room, said once in
    the log, while ctl still answers. Thawed, everything is written: the
    four requests, then the trigger's snapshot, which holds the job's
    records. With stop_first, the daemon is told to stop while it waits: the
    stop makes room, and writes it before exiting."""
    if not os.path.isdir(FREEZER):
        raise Skip("no cgroup v1 freezer to stop the snapshot writer with")
    os.makedirs(os.path.join(tmp, "mock"))
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--window-seconds", "1", "--trigger-errors", "1",
                                  "--trigger-slow", "0", "--trigger-every", "1h", "--trigger-before", "20s")
    frozen = os.path.join(FREEZER, os.path.basename(tmp))
    try:
        os.makedirs(frozen)
    except OSError as e:
        daemon.kill()
        daemon.wait()
        raise Skip(f"the cgroup v1 freezer takes no new group here: {e}")
    job, asks = None, []
    log = os.path.join(tmp, "daemon.log")
    try:
        writer = daemon_thread(daemon, "sbt-snapshots")
        open(os.path.join(frozen, "tasks"), "w").write(str(writer))
        open(os.path.join(frozen, "freezer.state"), "w").write("FROZEN")
        wait_for(lambda: open(os.path.join(frozen, "freezer.state")).read().strip() == "FROZEN", 10,
                 "the snapshot writer to freeze")
        for i in range(5):
            asks.append(subprocess.Popen(ctl + ["snapshot", "--last", "2s", "-o", os.path.join(tmp, f"ask{i}.sbt")],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        wait_for(lambda: any(a.poll() is not None for a in asks), 20, "the fifth request's answer")
        refused = [a for a in asks if a.poll() is not None]
        assert len(refused) == 1 and refused[0].returncode == 1 and \
            "busy writing snapshots" in refused[0].stderr.read(), [a.poll() for a in asks]
        job = subprocess.Popen(shlex.split(long_sim(tmp)), stdout=subprocess.DEVNULL)
        wait_for(lambda: "its snapshot waits for room" in open(log).read(), 30,
                 "the trigger's snapshot to wait for room")
        st = ctl_status(ctl)
        assert st["snapshots"].endswith("being written 4, cut to fit 0; a trigger's waits for room"), st
        if stop_first:
            daemon.send_signal(signal.SIGTERM)
            time.sleep(1)
            assert daemon.poll() is None, "the daemon exited with its snapshots unwritten"
        open(os.path.join(frozen, "freezer.state"), "w").write("THAWED")
        for a in asks:
            if a is not refused[0]:
                out, err = a.communicate(timeout=60)
                assert a.returncode == 0 and out.startswith("ok "), out + err
        if stop_first:
            assert daemon.wait(timeout=60) == 0
        else:
            wait_for(lambda: [f for f in spool_files(tmp) if "-errors-" in f and f.endswith(".manifest.json")],
                     30, "the trigger's snapshot")
            m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
            assert m[("spyre_bpftrace_snapshots_total", frozenset({("reason", "errors")}))] == 1
            assert m[("spyre_bpftrace_snapshot_failures_total", frozenset())] == 1  # the busy request
        said = open(log).read()
        assert said.count("its snapshot waits for room") == 1, said
        assert said.count("dropped") == 1 and "snapshot (request) dropped: four wait to be written" in said, said
        trace = [f for f in spool_files(tmp) if "-errors-" in f and f.endswith(".pftrace")]
        assert len(trace) == 1, spool_files(tmp)
        man = json.load(open(trace[0] + ".manifest.json"))
        assert man["reason"] == "errors" and job.pid in man["processes"] and man["records"] > 0, man
        r = subprocess.run([TOOL, "inspect", trace[0]], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        # thawed first: a process with a frozen thread cannot die of SIGKILL
        try:
            open(os.path.join(frozen, "freezer.state"), "w").write("THAWED")
        except OSError:
            pass
        for p in [daemon, job, *asks]:
            if p and p.poll() is None:
                p.kill()
                p.wait()
        try:
            os.rmdir(frozen)
        except OSError:
            pass


def run_daemon_trigger_waits_for_room(tmp):
    trigger_waits_for_room(tmp, stop_first=False)


def run_daemon_trigger_waits_at_stop(tmp):
    trigger_waits_for_room(tmp, stop_first=True)


def run_daemon_snapshot_cut_to_fit(tmp):
    """A snapshot alone over --spool-mib keeps its newest records: asked
    once the recorder holds several times the bound (whatever this
    machine's event rate), it is written under the bound, its manifest says
    cut_to_fit with the range kept, ctl's answer and the log say so, the
    metric counts it, and the job's last ioctls are in it."""
    os.makedirs(os.path.join(tmp, "mock"))
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers", "--spool-mib", "1",
                                  "--recorder-mib", "16", "--recorder-seconds", "600")
    sim = None
    try:
        sim = subprocess.Popen([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--threads", "2", "--jobs",
                                "100000000", "--delay-us", "0"], stdout=subprocess.DEVNULL)

        def recorder_mib():
            m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
            return m[("spyre_bpftrace_recorder_bytes", frozenset())] / 2**20
        wait_for(lambda: recorder_mib() >= 4, 120, "4 MiB of records in the recorder")
        sim.send_signal(signal.SIGSTOP)  # the newest records stay the newest
        r = subprocess.run(ctl + ["snapshot", "--last", "10m"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "cut to fit --spool-mib 1: the newest" in r.stdout, r.stdout + r.stderr
        path = r.stdout.split("\n")[0][3:]
        man = json.load(open(path + ".manifest.json"))
        assert man["cut_to_fit"] is True and 0 < man["records"] < man["records_in_window"], man
        assert man["kept"]["to_boottime_ns"] == man["window"]["to_boottime_ns"] and \
            man["kept"]["from_boottime_ns"] > man["window"]["from_boottime_ns"], man
        assert os.path.getsize(path) + os.path.getsize(path + ".manifest.json") <= 1 << 20
        assert sim.pid in man["processes"], man
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        assert m[("spyre_bpftrace_snapshots_cut_total", frozenset())] == 1
        assert m[("spyre_bpftrace_snapshot_failures_total", frozenset())] == 0
        assert "cut to fit 1" in subprocess.run(ctl + ["status"], capture_output=True, text=True).stdout
        r = subprocess.run([TOOL, "inspect", path], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        # the newest records are the ones kept: the job's last ioctl, by
        # a snapshot of the last second written where there is no bound
        last = os.path.join(tmp, "last.sbt")
        r = subprocess.run(ctl + ["snapshot", "--last", "10m", "-o", last], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0 and "cut to fit" not in r.stdout, r.stdout + r.stderr
        events, _ = parse_dump(last, outputs=False)
        newest = max(e["ts"] for e in events if e["type"] == "ioctl" and e["tgid"] == sim.pid)
        assert man["kept"]["from_boottime_ns"] <= newest, (man["kept"], newest)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        log = open(os.path.join(tmp, "daemon.log")).read()
        assert "cut to fit --spool-mib 1" in log, log
    finally:
        for p in (daemon, sim):
            if p and p.poll() is None:
                p.kill()
                p.wait()


def run_daemon_kubernetes_dirs(tmp):
    """The directories the DaemonSet gives the daemon: an emptyDir (0777,
    empty) as --runtime-dir and a hostPath DirectoryOrCreate (0755) as
    --state-dir. The daemon makes both 0700, says so, and runs; a 0777
    directory that already holds something, or one that is not root's, is
    refused with the reason."""
    run_dir, state = os.path.join(tmp, "run"), os.path.join(tmp, "state")
    os.makedirs(run_dir)
    os.makedirs(state)
    os.chmod(run_dir, 0o777)
    os.chmod(state, 0o755)
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers")
    try:
        assert ctl_status(ctl)["version"], "no status"
        assert http_get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        for d in (run_dir, state, os.path.join(state, "snapshots")):
            assert os.stat(d).st_mode & 0o777 == 0o700, f"{d}: {os.stat(d).st_mode & 0o777:o}"
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        log = open(os.path.join(tmp, "daemon.log")).read()
        assert f"--runtime-dir '{run_dir}' was 0777; made it 0700" in log and \
            f"--state-dir '{state}' was 0755; made it 0700" in log, log
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    planted, theirs = os.path.join(tmp, "planted"), os.path.join(tmp, "theirs")
    os.makedirs(planted)
    open(os.path.join(planted, "control"), "w").close()
    os.chmod(planted, 0o777)
    os.makedirs(theirs)
    os.chown(theirs, 65534, 65534)
    for d, why in ((planted, "others could write into it, and it is not empty"), (theirs, "is not a directory of ours")):
        r = subprocess.run([TOOL, "daemon", "--listen", f"127.0.0.1:{free_port()}", "--runtime-dir", d,
                            "--state-dir", os.path.join(tmp, "state2"), "--no-sampling", "--no-triggers"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and why in r.stderr and "hint:" in r.stderr, (d, r.returncode, r.stderr[-600:])


FAKE_IOCTLS = r"""
import fcntl, os, sys
fd = os.open("/dev/null", os.O_RDONLY)
failed = 0
for _ in range(int(sys.argv[1])):
    try:
        fcntl.ioctl(fd, 0x3b64)  # VFIO_GET_API_VERSION's number
    except OSError:
        failed += 1
print(failed)
"""


def vfio_series(port):
    """Every spyre_vfio_* series of the daemon's /metrics, by name and labels."""
    m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
    return {k: v for k, v in m.items() if k[0].startswith("spyre_vfio_")}


def ioctls_by_cmd(port):
    return {dict(k[1])["cmd"]: int(v) for k, v in vfio_series(port).items()
            if k[0] == "spyre_vfio_ioctls_total"}


def run_daemon_fake_vfio_ignored(tmp):
    """VFIO's ioctl numbers on a file that is not VFIO's count for nothing:
    user nobody makes 100,000 of them on /dev/null, and no spyre_vfio_*
    series changes, nobody holds a card, no window opens, no trigger fires,
    nothing of it is in the flight recorder. The simulator's mock files
    below --vfio-path are still counted exactly; the same files elsewhere
    are not; a mock file's fd reused for /dev/null counts for nothing."""
    os.makedirs(os.path.join(tmp, "mock"))
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--trigger-errors", "25", "--trigger-every", "1s")
    elsewhere = tempfile.mkdtemp(prefix="sbt-not-vfio-")
    try:
        before = vfio_series(port)
        flood = subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                                  sys.executable, "-c", FAKE_IOCTLS, "100000"], stdout=subprocess.PIPE, text=True)
        out, _ = flood.communicate(timeout=120)
        assert flood.returncode == 0 and int(out) == 100000, f"the ioctls were not all made: {out}"
        # the same mock files outside --vfio-path
        r = subprocess.run([SIM, "--mock-dir", elsewhere, "--jobs", "3", "--json", os.path.join(tmp, "out.json")],
                           stdout=subprocess.DEVNULL, timeout=60)
        assert r.returncode == 0
        time.sleep(6)  # a trigger check (every 5 s) has seen it all
        assert vfio_series(port) == before, "a counter moved for ioctls on files that are not VFIO's"
        st = ctl_status(ctl)
        assert st["processes"] == "with a card 0" and st["window"] == "none", st
        assert st["triggers"].startswith("fired: errors 0,"), st
        snap = os.path.join(tmp, "snap.sbt")
        r = subprocess.run(ctl + ["snapshot", "--last", "60s", "-o", snap], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert not [e for e in parse_dump(snap, outputs=False)[0] if e["tgid"] == flood.pid], \
            "the flood is in the flight recorder"
        # the mock files below --vfio-path: every ioctl, by command
        r = subprocess.run([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--jobs", "3", "--json",
                            os.path.join(tmp, "in.json")], stdout=subprocess.DEVNULL, timeout=60)
        assert r.returncode == 0
        want = {}
        for i in json.load(open(os.path.join(tmp, "in.json")))["ioctls"]:
            want[i["cmd"]] = want.get(i["cmd"], 0) + 1
        wait_for(lambda: ioctls_by_cmd(port) == want, 10, f"the mock ioctls counted: {want}")
        # what a file is, is remembered per struct file: a mock file closed
        # and its fd (and likely its struct file) reused for /dev/null, 200
        # times over, counts the mock file's ioctls only
        mock = os.path.join(tmp, "mock", "reused")
        open(mock, "w").close()
        code = ("import fcntl, os, sys\n"
                "for _ in range(200):\n"
                "    for path in (sys.argv[1], '/dev/null'):\n"
                "        fd = os.open(path, os.O_RDONLY)\n"
                "        for _ in range(10):\n"
                "            try: fcntl.ioctl(fd, 0x3b64)\n"
                "            except OSError: pass\n"
                "        os.close(fd)\n")
        subprocess.run([sys.executable, "-c", code, mock], check=True, timeout=60)
        want["VFIO_GET_API_VERSION"] = want.get("VFIO_GET_API_VERSION", 0) + 2000
        wait_for(lambda: ioctls_by_cmd(port) == want, 10, f"only the mock file's ioctls counted: {want}")
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
        daemon.kill()
        daemon.wait()


def nobody_dir(tmp):
    """A directory below tmp that user nobody may write (and tmp it may enter)."""
    d = os.path.join(tmp, "pub")
    os.makedirs(os.path.join(d, "mock"), exist_ok=True)
    os.chmod(tmp, 0o755)
    for sub, _, _ in os.walk(d):
        os.chmod(sub, 0o777)
    return d


AS_NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]


def run_daemon_recorder_fair(tmp):
    """Many processes of one user cannot flush another user's evidence from
    the flight recorder: a root job's ioctls are in, then five processes of
    user nobody flood VFIO ioctls (on a mock file below --vfio-path) worth
    some twenty recorders. A snapshot still holds every ioctl of the job;
    the flood kept its newest records (nothing dropped over a share); what
    went was nobody's, said per user in /metrics, the ctl answer, the
    manifest and the log; kept, evicted and lost add up to the flood."""
    if not shutil.which("setpriv"):
        raise Skip("no setpriv")
    pub = nobody_dir(tmp)
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers", "--recorder-mib", "4")
    floods = []
    try:
        job = os.path.join(tmp, "job.json")
        r = subprocess.run([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--jobs", "3", "--json", job],
                           stdout=subprocess.DEVNULL, timeout=60)
        assert r.returncode == 0
        job = json.load(open(job))
        flood_file = os.path.join(pub, "mock", "vfio")
        open(flood_file, "w").close()
        os.chmod(flood_file, 0o666)
        flood_code = FAKE_IOCTLS.replace('"/dev/null"', "sys.argv[2]")
        per, n = 60000, 5
        floods = [subprocess.Popen(AS_NOBODY + [sys.executable, "-c", flood_code, str(per), flood_file],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
        for f in floods:
            out, err = f.communicate(timeout=300)
            assert f.returncode == 0, err
        snap = os.path.join(tmp, "snap.sbt")
        r = subprocess.run(ctl + ["snapshot", "--last", "300s", "-o", snap], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        events, _ = parse_dump(snap, outputs=False)
        kept = [e for e in events if e["type"] == "ioctl" and e["tgid"] == job["pid"]]
        flooded = [e for e in events if e["type"] == "ioctl" and e["tgid"] in {f.pid for f in floods}]
        assert len(kept) == len(job["ioctls"]), f"{len(kept)} of the job's {len(job['ioctls'])} ioctls left"
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        evicted = {dict(k[1])["uid"]: v for k, v in m.items() if k[0] == "spyre_bpftrace_recorder_evicted_records_total"}
        lost = m[("spyre_bpftrace_lost_records_total", frozenset())]
        print(f"     flood of {n * per}: {len(flooded)} kept, {evicted} evicted, {lost:.0f} lost")
        assert set(evicted) == {"65534"} and evicted["65534"] > 0, evicted
        assert len(flooded) > 0 and len(flooded) + evicted["65534"] + lost >= n * per, (len(flooded), evicted, lost)
        # the newest kept: the last flood records are in, every one after the first kept of each process
        assert "records of the window were evicted from the full recorder (user 65534: " in r.stdout, r.stdout
        man = json.load(open(snap + ".manifest.json"))
        assert list(man["dropped_by_recorder_by_uid"]) == ["65534"] and man["dropped_by_recorder"] > 0, man
        wait_for(lambda: "records of user 65534 evicted" in open(os.path.join(tmp, "daemon.log")).read(), 15,
                 "the log to name the flood's user")
    finally:
        for f in floods:
            if f.poll() is None:
                f.kill()
        daemon.kill()
        daemon.wait()


def run_daemon_lone_job_keeps_its_last(tmp):
    """No attacker: one busy job alone on the host fills the recorder with
    its runtime calls (detail windows asked for until the recorder has
    evicted some of the job's own records, so the checks are on a full
    recorder). Its last seconds are all kept: a snapshot of the last 3 s
    holds the job's ioctls throughout, and a 1 s ctl record window its
    runtime calls throughout (no gap longer than a fraction of a second,
    up to both ends), with nothing of either evicted."""
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers", "--recorder-mib", "16")
    job = None

    def evicted():
        m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
        return m[("spyre_bpftrace_recorder_dropped_records_total", frozenset({("reason", "evicted")}))]

    try:
        job = subprocess.Popen([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--threads", "2",
                                "--jobs", "100000000", "--delay-us", "200"], stdout=subprocess.DEVNULL)
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 1", 20, "the daemon to see the job")
        for _ in range(10):  # each window some MB of calls
            if evicted():
                break
            r = subprocess.run(ctl + ["record", "--seconds", "6", "-o", os.path.join(tmp, "fill.sbt")],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
        assert evicted() > 0, "ten 6 s windows did not fill a 16 MiB recorder"
        for what in ("snapshot", "record"):
            out = os.path.join(tmp, f"{what}.sbt")
            args = ["snapshot", "--last", "3s"] if what == "snapshot" else ["record", "--seconds", "1"]
            r = subprocess.run(ctl + args + ["-o", out], capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            man = json.load(open(out + ".manifest.json"))
            w = man["window"]
            events, _ = parse_dump(out, outputs=False)
            kind = "ioctl" if what == "snapshot" else "call"
            ts = sorted(e["ts"] for e in events if e["type"].startswith(kind) and e["tgid"] == job.pid)
            assert len(ts) > 100, f"{what}: {len(ts)} {kind} records of the job"
            # BOOTTIME in the dump; the window in the manifest likewise
            edges = [ts[0] - w["from_boottime_ns"], w["to_boottime_ns"] - ts[-1]]
            gap = max(b - a for a, b in zip(ts, ts[1:]))
            print(f"     {what}: {len(ts)} {kind} records, widest gap {gap / 1e6:.0f} ms, edges "
                  f"{edges[0] / 1e6:.0f}/{edges[1] / 1e6:.0f} ms; {evicted():.0f} evicted from the recorder")
            assert gap < 500e6 and max(edges) < 500e6, (what, gap, edges)
            assert man["dropped_by_recorder"] == 0 and man["dropped_by_recorder_complete"], man
    finally:
        if job and job.poll() is None:
            job.kill()
            job.wait()
        daemon.kill()
        daemon.wait()


def run_daemon_private_tmp_said(tmp):
    """A daemon whose /var/tmp is its own (systemd's PrivateTmp=yes; here a
    private mount namespace with a tmpfs there) says so when ctl asks for
    a file in it, which the user would look for in vain; a path elsewhere
    gets no such note."""
    if not shutil.which("unshare"):
        raise Skip("no unshare")
    run_dir, port = os.path.join(tmp, "run"), free_port()
    cmd = ("mount -t tmpfs none /var/tmp && exec " +
           " ".join(shlex.quote(a) for a in [TOOL, "daemon", "--listen", f"127.0.0.1:{port}", "--runtime-dir",
                                             run_dir, "--state-dir", os.path.join(tmp, "state"), "--no-sampling",
                                             "--no-triggers"]))
    daemon = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd],
                              stderr=open(os.path.join(tmp, "daemon.log"), "w"))
    ctl = [TOOL, "ctl", "--runtime-dir", run_dir]
    name = f"sbt-private-{os.getpid()}.json"
    try:
        wait_for(lambda: os.path.exists(os.path.join(run_dir, "control")), 20, "the control socket")
        r = subprocess.run(ctl + ["record", "--seconds", "0.5", "-o", f"/var/tmp/{name}"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and "sees this file's directory as another than you do" in r.stdout and \
            "hint:" in r.stdout, \
            r.stdout + r.stderr
        assert not os.path.exists(f"/var/tmp/{name}"), "the file is in the host's /var/tmp after all"
        out = os.path.join(tmp, name)
        r = subprocess.run(ctl + ["record", "--seconds", "0.5", "-o", out], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and "note:" not in r.stdout and os.path.exists(out), r.stdout + r.stderr
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)


def run_daemon_mounts_tracefs(tmp):
    """On a host that has not mounted tracefs (a fresh one: nothing has
    traced yet), the daemon mounts it to find the syscall tracepoints, as
    record does, and starts. Here in a private mount namespace without
    tracefs, so the host's own mount stays as it is."""
    if not shutil.which("unshare"):
        raise Skip("no unshare")
    run_dir, port = os.path.join(tmp, "run"), free_port()
    os.makedirs(os.path.join(tmp, "cost"))
    open(os.path.join(tmp, "cost", "vfio"), "w").close()
    cmd = ("for m in /sys/kernel/debug/tracing /sys/kernel/tracing /sys/kernel/debug; do "
           "while mountpoint -q $m; do umount $m || exit 9; done; done; "
           "test -e /sys/kernel/tracing/events && exit 8; exec " +
           " ".join(shlex.quote(a) for a in [TOOL, "daemon", "--listen", f"127.0.0.1:{port}", "--runtime-dir",
                                             run_dir, "--state-dir", os.path.join(tmp, "state"), "--no-sampling",
                                             "--no-triggers", "--vfio-path", tmp]))
    log = os.path.join(tmp, "daemon.log")
    daemon = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", cmd],
                              stderr=open(log, "w"))
    try:
        wait_for(lambda: daemon.poll() is not None or os.path.exists(os.path.join(run_dir, "control")), 20,
                 "the control socket")
        assert daemon.poll() is None, f"the daemon stopped ({daemon.returncode}): " + open(log).read()
        # its ioctl hook is in: a VFIO ioctl on the mock file is counted
        fd = os.open(os.path.join(tmp, "cost", "vfio"), os.O_RDWR)
        try:
            for _ in range(10):
                try:
                    fcntl.ioctl(fd, 0x3b64)  # VFIO_GET_API_VERSION's number
                except OSError:
                    pass
        finally:
            os.close(fd)
        got = ioctls_by_cmd(port)
        assert got.get("VFIO_GET_API_VERSION") == 10, got
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)


def run_daemon_http_slow_clients(tmp):
    """50 clients that connect to the daemon's metrics port and send one
    byte a second hold nothing: /healthz and /metrics each answer within
    100 ms throughout (the kubelet's liveness probe times out at 1 s), and
    each slow one is cut off after the second a request's head may take."""
    import socket
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers")
    slow = []
    try:
        http_get(f"http://127.0.0.1:{port}/healthz")  # the client's own first-use cost, not timed
        for _ in range(50):
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(b"G")
            slow.append(c)
        worst, times = 0.0, []
        for _ in range(10):
            for url in ("/healthz", "/metrics"):
                t0 = time.time()
                status, body = http_get(f"http://127.0.0.1:{port}{url}", timeout=2)
                worst = max(worst, time.time() - t0)
                times.append(round((time.time() - t0) * 1000, 1))
                assert status == 200 and (url == "/healthz" or "spyre_bpftrace_scrapes_total" in body)
            for c in slow:
                try:
                    c.sendall(b"E")
                except OSError:
                    pass  # already cut off
            time.sleep(0.1)
        print(f"     slowest answer beside 50 slow clients: {worst * 1000:.1f} ms ({times})")
        assert worst < 0.1, f"an answer took {worst * 1000:.0f} ms beside 50 slow clients"
        for c in slow:  # cut off: the server closed each (an answer or not)
            c.settimeout(5)
            while c.recv(4096):
                pass
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
    finally:
        for c in slow:
            c.close()
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


STORM = r"""
import selectors, socket, sys, time
port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
sel, end, made = selectors.DefaultSelector(), time.time() + seconds, 0
def connect():
    global made
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    sel.register(s, selectors.EVENT_READ)
    made += 1
for _ in range(n):
    connect()
while time.time() < end:
    for key, _ in sel.select(0.1):
        try:
            data = key.fileobj.recv(4096)
        except OSError:
            data = b""
        if not data:  # cut: back at once
            sel.unregister(key.fileobj)
            key.fileobj.close()
            connect()
print(made)
"""


def get_from(addr, port, url, timeout=5):
    """GET url from the source address addr: (status, body, seconds)."""
    import socket
    t = time.time()
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((addr, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(), time.time() - t


def run_daemon_http_reconnect_storm(tmp):
    """300 clients from 127.0.0.1 that reconnect as soon as they are cut
    (a pod gone wrong, or a hostile one) cannot starve another address: one
    address holds at most 16 of the server's connections, every connection
    is accepted at once, so /metrics asked from 127.0.0.2 answers within
    100 ms (the median of 20; each within 1 s), and ctl status, the
    liveness check the network cannot reach, answers within 1 s."""
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers")
    storm = None
    try:
        storm = subprocess.Popen([sys.executable, "-c", STORM, str(port), "300", "12"], stdout=subprocess.PIPE,
                                 text=True)
        time.sleep(2)
        times = []
        for _ in range(20):
            status, body, took = get_from("127.0.0.2", port, "/metrics")
            assert status == 200 and "spyre_bpftrace_scrapes_total" in body
            times.append(took)
            time.sleep(0.1)
        t = time.time()
        assert ctl_status(ctl)["version"]
        ctl_took = time.time() - t
        made = int(storm.communicate(timeout=60)[0])
        med = statistics.median(times)
        print(f"     /metrics from 127.0.0.2 beside {made} storm connections: median {med * 1000:.1f} ms, "
              f"max {max(times) * 1000:.1f} ms; ctl status {ctl_took * 1000:.0f} ms")
        assert made > 300, "the storm was never cut: it tested nothing"
        assert med < 0.1 and max(times) < 1 and ctl_took < 1, times
    finally:
        if storm and storm.poll() is None:
            storm.kill()
        daemon.kill()
        daemon.wait()


def run_daemon_hostile_library_path(tmp):
    """A process of user nobody holding a (mock) card with LD_LIBRARY_PATH
    at a directory of traps named like runtime libraries: a FIFO, a device
    node, symlinks to each, and a symlink to /etc/shadow. A detail window
    on it opens and closes on time, ctl status answers within 1 s all the
    while, the daemon never holds any of them open, says why it did not
    read the FIFO and the device, and looks at /etc/shadow not at all (its
    name is no runtime library's)."""
    pub = os.path.join(tmp, "pub")  # what nobody may run and write
    os.makedirs(os.path.join(pub, "mock"))
    shutil.copy2(SIM, pub)
    shutil.copytree(os.path.join(BUILD, "sim"), os.path.join(pub, "sim"))
    evil = os.path.join(pub, "evil")
    os.makedirs(evil)
    os.mkfifo(os.path.join(evil, "libflex.so.9"))
    os.mknod(os.path.join(evil, "libsenlib.so.8"), 0o666 | 0o020000, os.makedev(1, 3))  # like /dev/null
    os.symlink(os.path.join(evil, "libflex.so.9"), os.path.join(evil, "libflex.so.7"))
    os.symlink(os.path.join(evil, "libsenlib.so.8"), os.path.join(evil, "libsenlib.so.6"))
    os.symlink("/etc/shadow", os.path.join(evil, "libflex.so.5"))
    for d, _, files in os.walk(pub):
        os.chmod(d, 0o777)
    os.chmod(tmp, 0o755)
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers")
    job = None
    try:
        env = dict(os.environ, LD_LIBRARY_PATH=evil)
        job = subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                                os.path.join(pub, "spyre-sim-run"), "--mock-dir", os.path.join(pub, "mock"),
                                "--jobs", "1000000", "--delay-us", "2000"],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 1", 20, "the daemon to see nobody's job")
        t0 = time.time()
        rec = subprocess.Popen(ctl + ["record", "--seconds", "2", "-o", os.path.join(tmp, "w.sbt")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        worst, held = 0.0, set()
        while rec.poll() is None and time.time() - t0 < 30:
            t = time.time()
            r = subprocess.run(ctl + ["status"], capture_output=True, text=True, timeout=30)
            # while the window opens (its libraries found and probed) and
            # is open; its close, which waits for the kernel to remove each
            # uprobe (about 0.1 s apiece here), is not held to it yet
            if t - t0 < 1.5:
                worst = max(worst, time.time() - t)
            assert r.returncode == 0, r.stderr
            for fd in os.listdir(f"/proc/{daemon.pid}/fd"):
                try:
                    held.add(os.readlink(f"/proc/{daemon.pid}/fd/{fd}"))
                except OSError:
                    pass
            time.sleep(0.1)
        out, err = rec.communicate(timeout=30)
        took = time.time() - t0
        print(f"     window of 2 s answered in {took:.1f} s; ctl status at most {worst * 1000:.0f} ms meanwhile")
        assert rec.returncode == 0 and out.startswith("ok "), out + err
        # 2 s of window and its trace written; the rest is room for a slow machine
        assert took < 20, f"the 2 s window took {took:.1f} s"
        assert worst < 1, f"ctl status took {worst:.2f} s during the window"
        assert not [h for h in held if h.startswith(evil) or h == "/etc/shadow"], held
        log = open(os.path.join(tmp, "daemon.log")).read()
        for trap in ("libflex.so.9", "libsenlib.so.8"):
            assert f"{trap}: not a regular file of at most 1 GiB; not read" in log, log[-2000:]
        assert "shadow" not in log, log[-2000:]
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
    finally:
        for p in (daemon, job):
            if p and p.poll() is None:
                p.kill()
                p.wait()


def run_with_peak(argv, timeout, env=None):
    """Runs argv; (returncode, stdout, stderr, seconds, its peak RSS in
    bytes, as GNU time reads it: a child of ours would start at our peak)."""
    t = time.time()
    with tempfile.NamedTemporaryFile("r") as peak:
        try:
            r = subprocess.run(["/usr/bin/time", "-q", "-f", "%M", "-o", peak.name] + argv, capture_output=True,
                               text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{argv[:3]} ran over {timeout} s")
        kib = int(peak.read().split()[-1])
    return r.returncode, r.stdout, r.stderr, time.time() - t, kib * 1024


def hostile_libraries(tmp):
    """The three crafted libraries, each named libflex.so.9 in a directory
    of its own: {kind: directory}."""
    import decoy_elf
    dirs = {}
    for kind in ("sparse", "cold", "phdrs"):
        d = os.path.join(tmp, "hostile-" + kind)
        os.makedirs(d, exist_ok=True)
        decoy_elf.write_hostile(os.path.join(d, "libflex.so.9"), kind)
        dirs[kind] = d
    return dirs


def run_hostile_libraries_bounded(tmp):
    """Libraries crafted against their reader, as a card holder may map or
    put on its LD_LIBRARY_PATH: a sparse 1 GiB file (the reader once read it
    whole: 1 GB resident), 4,096 cold parts each as large as the file (once
    a copy each: 8 GB), 65,534 program headers before the one that maps
    150,000 symbols (once stuck for minutes). `list` reads each within a
    bounded memory and time and says what it refused; `record -d 3` on a job
    with all three on its LD_LIBRARY_PATH ends its capture on time, with
    the job's runtime calls, in bounded memory."""
    dirs = hostile_libraries(tmp)
    for kind, d in dirs.items():
        rc, out, err, took, peak = run_with_peak([TOOL, "list", os.path.join(d, "libflex.so.9")], 60)
        print(f"     list {kind}: {took:.2f} s, peak {peak >> 20} MiB, exit {rc}")
        assert peak < 64 << 20, f"list {kind}: {peak >> 20} MiB resident"
        assert took < 20, f"list {kind}: {took:.1f} s"
        expect = {"sparse": (0, ""), "cold": (0, "its cold part of 2093056 bytes is over the cap"),
                  "phdrs": (1, "65534 program headers and 5 sections, over the caps")}[kind]
        assert rc == expect[0] and expect[1] in out + err, (kind, rc, out[-500:], err[-500:])
    os.makedirs(os.path.join(tmp, "mock"))
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(dirs.values()))
    job = subprocess.Popen([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--jobs", "100000000", "--delay-us",
                            "2000"], env=env, stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = os.path.join(tmp, "r.sbt")
        rec = subprocess.Popen([TOOL, "record", "-p", str(job.pid), "-d", "3", "-o", out],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t0, said = time.time(), None
        for line in rec.stderr:
            if "duration elapsed" in line:
                said = time.time() - t0
                break
        rest, err = rec.communicate(timeout=120)
        total = time.time() - t0
        print(f"     record -d 3: capture ended at {said:.2f} s, exited at {total:.2f} s")
        assert rec.returncode == 0 and said is not None, err
        # the capture ends on time; the exit waits for the kernel to remove
        # the probes: the syscall tracepoints' links one after another
        # (65 ms each here), the uprobes beside them (0.35 s in all here,
        # where a uprobe a site took 3.3 s)
        assert said < 4, f"record -d 3 ended its capture after {said:.2f} s"
        assert total < 4, f"record -d 3 exited after {total:.2f} s"
        events, _ = parse_dump(out, outputs=False)
        calls = [e for e in events if e["type"] == "call_enter" and e["tgid"] == job.pid]
        assert len(calls) > 10, f"{len(calls)} runtime calls"
        # Ctrl-C, while it attaches (its libraries being read) and while it
        # records: ended within 1 s each
        for at in (0.05, 1.5):
            rec = subprocess.Popen([TOOL, "record", "-p", str(job.pid), "-o", out], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
            time.sleep(at)
            rec.send_signal(signal.SIGINT)
            t0 = time.time()
            rest, err = rec.communicate(timeout=120)
            took = time.time() - t0
            said = next((line for line in err.splitlines() if "interrupted" in line), "")
            print(f"     record, Ctrl-C at {at:.2f} s: exited {took:.2f} s later, exit {rec.returncode}: "
                  f"{said[:60]}")
            assert "interrupted" in err and took < 1, (took, rec.returncode, err[-800:])
    finally:
        job.kill()
        job.wait()


def run_daemon_root_file_in_user_namespace(tmp):
    """A card holder of user nobody in a user and mount namespace of its
    own bind-mounts /etc/shadow as libflex.so.3 in its LD_LIBRARY_PATH: to
    the daemon it is a regular file named like a runtime library, inside
    the process's root. The daemon opens the process's files with the
    process's identity, so the open is refused (permission denied, said in
    its log) and /etc/shadow is never read; the job's runtime is still
    found and traced. Without a user namespace here: skipped."""
    if not shutil.which("unshare") or not shutil.which("setpriv"):
        raise Skip("no unshare or setpriv")
    pub = nobody_dir(tmp)
    shutil.copy2(SIM, pub)
    shutil.copytree(os.path.join(BUILD, "sim"), os.path.join(pub, "sim"))
    evil = os.path.join(pub, "evil")
    os.makedirs(evil)
    open(os.path.join(evil, "libflex.so.3"), "w").close()
    for d, _, files in os.walk(pub):
        os.chmod(d, 0o777)
    probe = subprocess.run(AS_NOBODY + ["unshare", "-Urm", "true"], capture_output=True, text=True)
    if probe.returncode:
        raise Skip("no unprivileged user namespaces here: " + probe.stderr.strip())
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers", "-v")
    job = None
    try:
        cmd = (f"mount --bind /etc/shadow {evil}/libflex.so.3 && head -c1 {evil}/libflex.so.3 >/dev/null 2>&1; "
               f"exec {pub}/spyre-sim-run --mock-dir {pub}/mock --jobs 1000000 --delay-us 2000")
        job = subprocess.Popen(AS_NOBODY + ["unshare", "-Urm", "sh", "-c", cmd],
                               env=dict(os.environ, LD_LIBRARY_PATH=evil), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 1", 20, "the daemon to see nobody's job")
        out = os.path.join(tmp, "w.sbt")
        r = subprocess.run(ctl + ["record", "--seconds", "2", "-o", out], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        log = open(os.path.join(tmp, "daemon.log")).read()
        mine = [line for line in log.splitlines() if "libflex.so.3" in line]
        print("     " + "\n     ".join(mine[:3]))
        assert any("Permission denied" in line for line in mine), log[-3000:]
        assert not any("not an ELF file" in line for line in mine), mine
        events, _ = parse_dump(out, outputs=False)
        assert [e for e in events if e["type"] == "call_enter"], "the job's runtime was not traced"
    finally:
        if job and job.poll() is None:
            job.kill()
            job.wait()
        daemon.kill()
        daemon.wait()


def run_daemon_control_fair(tmp):
    """The control socket is served off the main loop, one daemon a
    runtime directory. 50 silent root clients hold connections open:
    ctl status still answers within 1 s, each silent one is told there was
    no request line. A second daemon on the same --runtime-dir (another
    port) refuses to start, naming the first's pid, and leaves its socket
    alone: the first still answers, and after it stops the socket is gone."""
    import socket
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers")
    sock = os.path.join(tmp, "run", "control")
    silent = []
    try:
        for _ in range(50):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(sock)
            silent.append(c)
        t = time.time()
        st = ctl_status(ctl)
        took = time.time() - t
        print(f"     ctl status beside 50 silent clients: {took * 1000:.0f} ms")
        assert st["version"] and took < 1, took
        for c in silent:
            c.settimeout(10)
            assert c.recv(200).startswith(b"error: no request line"), "a silent client was not told"
        second = subprocess.run([TOOL, "daemon", "--listen", f"127.0.0.1:{free_port()}", "--runtime-dir",
                                 os.path.join(tmp, "run"), "--state-dir", os.path.join(tmp, "state2"),
                                 "--no-sampling", "--no-triggers"], capture_output=True, text=True, timeout=60)
        assert second.returncode != 0 and f"another daemon (PID {daemon.pid}) serves --runtime-dir" in \
            second.stderr, second.stderr[-1000:]
        assert os.path.exists(sock) and ctl_status(ctl)["version"], "the first daemon lost its socket"
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
        assert not os.path.exists(sock)
    finally:
        for c in silent:
            c.close()
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()


class MemoryCgroup:
    """A memory cgroup of limit bytes below ours, as the systemd unit's
    MemoryMax= puts the daemon in (cgroup v2 memory.max, or v1's
    memory.limit_in_bytes); None from make() where the machine has none."""

    def __init__(self, path, v2):
        self.path, self.v2 = path, v2

    @staticmethod
    def make(name, limit):
        for line in open("/proc/self/cgroup").read().splitlines():
            hid, ctrls, rel = line.split(":", 2)
            if hid == "0" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
                base, v2, knob = "/sys/fs/cgroup" + rel, True, "memory.max"
            elif "memory" in ctrls.split(","):
                base, v2, knob = "/sys/fs/cgroup/memory" + rel, False, "memory.limit_in_bytes"
            else:
                continue
            path = os.path.join(base, name)
            try:
                os.makedirs(path, exist_ok=True)
                with open(os.path.join(path, knob), "w") as f:
                    f.write(str(limit))
                return MemoryCgroup(path, v2)
            except OSError:
                continue
        return None

    def add(self, pid):
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def peak(self):
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        try:
            return int(open(os.path.join(self.path, name)).read())
        except OSError:
            return None

    def ooms(self):
        name = "memory.events" if self.v2 else "memory.oom_control"
        for line in open(os.path.join(self.path, name)).read().splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
        return 0

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass


LARGE_HOLDER = r"""
import ctypes, fcntl, os, resource, sys, time
card, libdir, maps_dir, nmaps, nfds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
crafted = sys.argv[6:]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
nfds = min(nfds, hard - 100)  # what this machine allows
resource.setrlimit(resource.RLIMIT_NOFILE, (nfds + 100, hard))
held = [os.open("/dev/null", os.O_RDONLY) for _ in range(nfds)]  # open files, many
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
paths = [os.path.join(maps_dir, f"m{i}") for i in range(nmaps)]
for p in crafted + paths:  # crafted libraries, and executable mappings with long paths, many (no fd kept)
    fd = os.open(p, os.O_RDONLY)
    assert libc.mmap(None, 4096, 5, 2, fd, 0) not in (None, ctypes.c_void_p(-1).value)  # r-x, private
    os.close(fd)
fd = os.open(card, os.O_RDONLY)  # and a (mock) card: a card holder
try:
    fcntl.ioctl(fd, 0x3b64)
except OSError:
    pass
print("ready", nfds, flush=True)
time.sleep(600)
"""


MANY_FILES_HOLDERS = r"""
import fcntl, os, resource, sys, time
card, nfds, nprocs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
nfds = min(nfds, hard - 100)  # what this machine allows
resource.setrlimit(resource.RLIMIT_NOFILE, (nfds + 100, hard))
held = [os.open("/dev/null", os.O_RDONLY) for _ in range(nfds)]
fd = os.open(card, os.O_RDONLY)
kids = 0
while kids < nprocs - 1 and os.fork():  # each process a card holder with every file
    kids += 1
try:
    fcntl.ioctl(fd, 0x3b64)
except OSError:
    pass
if kids == nprocs - 1:
    print("ready", nfds, flush=True)
time.sleep(600)
"""


def run_daemon_many_holders_many_files(tmp):
    """32 card holders of user nobody, each with 2,000 open files: the
    daemon reads which cards they hold from their files (up to 1,024 a
    process) on a thread of its own, never on its main loop. bpftrace counts
    the daemon's readlinks by thread over a window: the main loop's are a
    few (not one a file), the card reader's at least a window's holders'
    worth; all 32 are traced in the window."""
    if not shutil.which("setpriv") or not shutil.which("bpftrace"):
        raise Skip("no setpriv or bpftrace")
    pub = nobody_dir(tmp)
    card = os.path.join(pub, "mock", "vfio")
    open(card, "w").close()
    os.chmod(card, 0o666)
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers")
    holders = counter = None
    try:
        holders = subprocess.Popen(AS_NOBODY + [sys.executable, "-c", MANY_FILES_HOLDERS, card, "2000", "32"],
                                   stdout=subprocess.PIPE, text=True, start_new_session=True)
        ready = holders.stdout.readline().split()
        assert ready and ready[0] == "ready", ready
        nfds = int(ready[1])
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 32", 30, "the daemon to see 32 holders")
        prog = ("tracepoint:syscalls:sys_enter_readlink, tracepoint:syscalls:sys_enter_readlinkat "
                f"/pid == {daemon.pid}/ {{ @[tid] = count(); }} "
                "BEGIN { printf(\"counting\\n\"); }")
        counter = subprocess.Popen(["bpftrace", "-e", prog], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        for line in counter.stdout:  # "Attaching 3 probes...", then ours
            if "counting" in line:
                break
        else:
            raise AssertionError("bpftrace did not start: " + counter.stderr.read()[-500:])
        out = os.path.join(tmp, "w.sbt")
        r = subprocess.run(ctl + ["record", "--seconds", "1", "-o", out], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        counter.send_signal(signal.SIGINT)
        said, _ = counter.communicate(timeout=60)
        by_tid = {int(m.group(1)): int(m.group(2)) for m in re.finditer(r"@\[(\d+)\]: (\d+)", said)}
        names = {}
        for t in by_tid:
            try:
                names[t] = open(f"/proc/{daemon.pid}/task/{t}/comm").read().strip()
            except OSError:
                names[t] = "?"
        main = by_tid.get(daemon.pid, 0)
        reader = sum(n for t, n in by_tid.items() if names[t] == "sbt-cardscan")
        print(f"     32 holders of {nfds} files: readlinks on the main loop {main}, on the card reader {reader}")
        _, traced = window_of(json.load(open(out + ".manifest.json")))
        assert len(traced) == 32, f"{len(traced)} of the 32 holders traced"
        # a process's few (its executable, say), not one a file: 32 x 1,024 would be 32,768
        assert main <= 32 * 8, by_tid
        assert reader >= 32 * min(nfds, 1024), (by_tid, names)
    finally:
        for p in (counter, holders):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL) if p is holders else p.kill()
                p.wait()
        daemon.kill()
        daemon.wait()


def run_daemon_process_made_large(tmp):
    """A card holder of user nobody makes large what the daemon looks at:
    19,000 open files, 20,000 executable mappings with 3.5 KB paths, an
    LD_LIBRARY_PATH of 431 directories (one directory of 70,000 files named
    431 times, and distinct ones), and the three crafted runtime libraries
    of hostile_libraries_bounded mapped (the daemon reads a card holder's
    mapped runtime between windows). The daemon runs in a 256 MiB memory
    cgroup, as the unit's MemoryMax= puts it, where the machine has one. A
    root job's detail window beside it gets at least 90% of the runtime
    calls a second it gets without the attacker, ctl status answers within
    1 s throughout, and the daemon lives, its peak memory under 256 MiB
    and never killed for memory."""
    if not shutil.which("setpriv"):
        raise Skip("no setpriv")
    pub = nobody_dir(tmp)
    big = os.path.join(pub, "big")
    os.makedirs(big)
    for i in range(70000):
        open(os.path.join(big, f"libx{i}.so"), "w").close()
    deep = pub
    while len(deep) < 3400:
        deep = os.path.join(deep, "d" * 100)
    os.makedirs(deep)
    for i in range(20000):
        with open(os.path.join(deep, f"m{i}"), "wb") as f:
            f.write(b"\0" * 4096)
    dirs = [big] * 400 + [os.path.join(pub, f"e{i}") for i in range(31)]
    for d in dirs[400:]:
        os.makedirs(d)
    card = os.path.join(pub, "mock", "vfio")
    open(card, "w").close()
    for d, _, _ in os.walk(pub):
        os.chmod(d, 0o777)
    os.chmod(card, 0o666)
    crafted = [os.path.join(d, "libflex.so.9") for d in hostile_libraries(pub).values()]
    for f in crafted:
        os.chmod(f, 0o644)
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers")
    cg = MemoryCgroup.make(f"sbt-e2e-{os.getpid()}", 256 << 20)
    if cg:
        cg.add(daemon.pid)
    job = attacker = None

    def window(name):
        """A 2 s window: the job's calls a second in it, ctl status's worst."""
        worst = 0.0

        def during():
            nonlocal worst
            t0 = time.time()
            while time.time() - t0 < 1.5:
                t = time.time()
                ctl_status(ctl)
                worst = max(worst, time.time() - t)
                time.sleep(0.05)
        out = os.path.join(tmp, name + ".sbt")
        _, man = record_window_during(ctl, out, 2, during)
        win, traced = window_of(man)
        me = traced[job.pid]
        events, _ = parse_dump(out, outputs=False)
        calls = [e for e in events if e["type"] == "call_enter" and e["tgid"] == job.pid]
        span = (win["to_boottime_ns"] - me["traced_from_boottime_ns"]) / 1e9
        return (len(calls) / span if span > 0 else 0.0), worst

    try:
        job = subprocess.Popen([SIM, "--mock-dir", os.path.join(tmp, "mock"), "--jobs", "100000000",
                                "--delay-us", "2000"], stdout=subprocess.DEVNULL)
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 1", 20, "the daemon to see the job")
        alone, _ = window("alone")
        attacker = subprocess.Popen(AS_NOBODY + [sys.executable, "-c", LARGE_HOLDER, card, big, deep, "20000",
                                                 "19000"] + crafted, env=dict(os.environ, LD_LIBRARY_PATH=":".join(dirs)),
                                    stdout=subprocess.PIPE, text=True)
        ready = attacker.stdout.readline().split()
        assert ready[0] == "ready", ready
        wait_for(lambda: ctl_status(ctl)["processes"] == "with a card 2", 20, "the daemon to see the attacker")
        beside, worst = window("beside")
        hwm = int(re.search(r"VmHWM:\s+(\d+)", open(f"/proc/{daemon.pid}/status").read()).group(1)) << 10
        print(f"     the attacker: {ready[1]} open files, 20,000 mappings, 431 library directories")
        print(f"     the job's calls a second: {alone:.0f} alone, {beside:.0f} beside the attacker; ctl status "
              f"at most {worst * 1000:.0f} ms; the daemon's peak {hwm >> 20} MiB")
        if cg:
            print(f"     in a 256 MiB memory cgroup: its peak {(cg.peak() or 0) >> 20} MiB, {cg.ooms()} killed")
            assert not cg.ooms(), "the daemon's cgroup ran out of memory"
        else:
            print("     no memory cgroup here: the daemon's peak is its own VmHWM")
        assert daemon.poll() is None, "the daemon died"
        assert beside >= 0.9 * alone, (alone, beside)
        assert worst < 1, worst
        assert hwm < 256 << 20, hwm
    finally:
        for p in (job, attacker):
            if p and p.poll() is None:
                p.kill()
                p.wait()
        daemon.kill()
        daemon.wait()
        if cg:
            cg.remove()


def proc_status(pid):
    """/proc/PID/status as a dict; None when the process is gone."""
    try:
        st = dict(line.split(":\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines()
                  if ":\t" in line)
    except OSError:
        return None
    return {k: v.strip() for k, v in st.items()}


def daemon_children(pid):
    """The status fields of the daemon's child processes now."""
    kids = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            kids += [st for st in map(proc_status, open(f"/proc/{pid}/task/{t}/children").read().split()) if st]
        except OSError:
            pass
    return kids


def sandboxed(st):
    """A library reader as it reads: user nobody, no capabilities,
    no_new_privs, a seccomp filter."""
    return st["Uid"].split()[:2] == ["65534", "65534"] and st["CapEff"] == "0000000000000000" and \
        st["NoNewPrivs"] == "1" and st["Seccomp"] == "2"


def run_daemon_slow_library_off_main_loop(tmp):
    """A process of user nobody puts a library that takes seconds to read
    (1.5 million symbols, a regular file named like the runtime's) on its
    LD_LIBRARY_PATH, dlopen()s a copy of the runtime the daemon never read
    and takes a (mock) card inside a detail window. The daemon looks for
    its libraries on its discovery thread: ctl status answers within 1 s
    all the while the window is open; the runtime copy, read first, goes
    on at once, not after the slow file (the process is traced in full
    well before that read ends); the slow read stops at the 2 s budget (or
    ends, on a machine that reads it faster). The file is read in a
    sandboxed child of the daemon: user nobody, no capabilities,
    no_new_privs, a seccomp filter."""
    import decoy_elf
    pub = os.path.join(tmp, "pub")
    os.makedirs(os.path.join(pub, "mock"))
    shutil.copy2(os.path.join(BUILD, "spyre-sim-dlopen"), pub)
    lib = hidden_runtime(pub, ("copy",))
    slow_dir = os.path.join(pub, "slow")
    os.makedirs(slow_dir)
    slow = os.path.join(slow_dir, "libflex.so.4")
    decoy_elf.write(slow, 1500000)
    # how long the file takes to read whole, here: the bounds below mean
    # something only if that is well over them
    t = time.time()
    subprocess.run([TOOL, "list", slow], capture_output=True, check=True, timeout=120)
    read_s = time.time() - t
    print(f"     reading the decoy library whole: {read_s:.1f} s")
    assert read_s > 1.5, f"the decoy library reads in {read_s:.1f} s here: make it bigger"
    for d, _, files in os.walk(pub):
        os.chmod(d, 0o777)
    os.chmod(tmp, 0o755)
    daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers", "-v")
    job, seconds = None, 4.0
    try:
        def during():
            nonlocal job
            env = dict(os.environ, LD_LIBRARY_PATH=slow_dir)
            job = subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                                    os.path.join(pub, "spyre-sim-dlopen"), lib, "--mock-dir",
                                    os.path.join(pub, "mock"), "--jobs", "1000000", "--delay-us", "2000"],
                                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            t0, worst, asked = time.time(), 0.0, 0
            # while the window is open (its close, which waits for the
            # kernel to remove each uprobe, is not held to it)
            while time.time() - t0 < seconds - 1:
                t = time.time()
                r = subprocess.run(ctl + ["status"], capture_output=True, text=True, timeout=30)
                assert r.returncode == 0, r.stderr
                worst = max(worst, time.time() - t)
                asked += 1
                for kid in daemon_children(daemon.pid):
                    if not sandboxed(kid):  # seen between its fork and its sandbox: looked at again
                        time.sleep(0.05)
                        kid = proc_status(kid["Pid"])
                    if kid:
                        readers.append(kid)
                time.sleep(0.05)
            return worst, asked
        out = os.path.join(tmp, "w.sbt")
        readers = []
        (worst, asked), man = record_window_during(ctl, out, seconds, during)
        assert readers, "no library reader child seen while the slow library was read"
        for st in readers:
            assert sandboxed(st), st
        print(f"     {len(readers)} looks at a library reader: nobody, no capabilities, no_new_privs, seccomp")
        print(f"     ctl status asked {asked} times in the window, at most {worst * 1000:.0f} ms")
        assert worst < 1, f"ctl status took {worst:.2f} s while the library was read"
        win, traced = window_of(man)
        me = traced.get(job.pid)
        assert me and me["joined"] == "card", win
        late = (me["traced_from_boottime_ns"] - me["seen_boottime_ns"]) / 1e9
        print(f"     traced in full {late:.2f} s after it joined")
        assert late < 1.0, f"the runtime went on {late:.2f} s after the process joined: after the slow file"
        events, _ = parse_dump(out, outputs=False)
        assert [e for e in events if e["type"] == "call_enter" and e["tgid"] == job.pid], "no runtime call"
        log = open(os.path.join(tmp, "daemon.log")).read()
        # stopped by the budget, or by the window's end (they come together)
        stopped = f"{slow}: reading stopped (" in log
        whole = f"{slow} (the process's LD_LIBRARY_PATH): 0 functions" in log
        assert stopped or whole, log[-3000:]
        print(f"     the read {'stopped' if stopped else 'ended'}")
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
    finally:
        for p in (daemon, job):
            if p and p.poll() is None:
                p.kill()
                p.wait()


def run_daemon_kubelet_allocations(tmp):
    """spyre_device_allocation_info from the kubelet's pod-resources API:
    a kubelet stand-in serving v1.PodResourcesLister/List with the real
    gRPC stack (python3-grpcio, the API's protobuf schema compiled by
    protoc). Only the Spyre resource's devices, PCI addresses with their
    domain; a pod gone is gone after SIGHUP; a kubelet gone keeps the
    last answer and is said once."""
    gen, sock, pods = os.path.join(tmp, "gen"), os.path.join(tmp, "kubelet.sock"), os.path.join(tmp, "pods.json")
    os.makedirs(gen)
    subprocess.run(["protoc", f"--python_out={gen}", "-I", os.path.join(ROOT, "tests", "kubelet"),
                    "podresources.proto"], check=True)
    spyre = {"resource_name": "ibm.com/spyre_pf", "device_ids": ["0000:3b:00.0", "3c:00.0"], "numa": [0]}
    gpu = {"resource_name": "nvidia.com/gpu", "device_ids": ["GPU-1"]}
    with open(pods, "w") as f:
        json.dump([{"name": "infer-7d9f", "namespace": "ml", "containers": [
                       {"name": "model", "cpu_ids": [2, 3], "devices": [spyre, gpu]}]},
                   {"name": "idle", "namespace": "default", "containers": [{"name": "c", "devices": []}]}], f)
    kubelet = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "tests", "kubelet", "kubelet.py"), sock,
                                pods, gen], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    daemon = None
    try:
        assert kubelet.stdout.readline().strip() == "ready", kubelet.stderr.read()
        daemon, ctl, port = daemon_up(tmp, "--no-sampling", "--no-triggers", "--kubelet-socket", sock)

        def info():
            m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
            return sorted(tuple(sorted(dict(k[1]).items())) for k, v in m.items()
                          if k[0] == "spyre_device_allocation_info" and v == 1)
        want = [tuple(sorted({"device": dev, "resource": "ibm.com/spyre_pf", "namespace": "ml",
                              "pod": "infer-7d9f", "container": "model"}.items()))
                for dev in ("0000:3b:00.0", "0000:3c:00.0")]
        wait_for(lambda: info() == want, 20, "the allocations from the kubelet")
        with open(pods, "w") as f:  # the pod ended
            json.dump([], f)
        daemon.send_signal(signal.SIGHUP)
        wait_for(lambda: info() == [], 20, "the ended pod's allocations to go")
        with open(pods, "w") as f:
            json.dump([{"name": "train-1", "namespace": "ml", "containers": [{"name": "t", "devices": [spyre]}]}], f)
        daemon.send_signal(signal.SIGHUP)
        wait_for(lambda: len(info()) == 2, 20, "the new pod's allocations")
        kubelet.kill()
        kubelet.wait()
        daemon.send_signal(signal.SIGHUP)
        time.sleep(1)
        daemon.send_signal(signal.SIGHUP)
        wait_for(lambda: "cannot reach the kubelet" in open(os.path.join(tmp, "daemon.log")).read(), 20,
                 "the daemon to say the kubelet is gone")
        assert len(info()) == 2 and ("pod", "train-1") in info()[0], info()
        log = open(os.path.join(tmp, "daemon.log")).read()
        assert log.count("cannot reach the kubelet") == 1, log
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=20) == 0
    finally:
        for p in (daemon, kubelet):
            if p and p.poll() is None:
                p.kill()
                p.wait()


TESTS = [
    ("c_multithread_matches_sim", run_c_multithread),
    ("p_attach_matches_sim", run_p_attach),
    ("duration_ends_with_readable_capture", run_duration),
    ("duration_while_attaching", run_duration_while_attaching),
    ("sigint_flushes_capture", run_sigint),
    ("sigint_command_ignores_term", run_sigint_command_ignores_term),
    ("static_command_runs_once", run_static_command_runs_once),
    ("sigkill_leaves_nothing_behind", run_sigkill_cleanup),
    ("errors_one_line_with_hint", run_errors),
    ("probe_option", run_probe_option),
    ("follows_children", run_follows_children),
    ("loss_is_counted", run_loss_is_counted),
    ("irq_filter", run_irq_filter),
    ("verbose_plan", run_verbose_plan),
    ("throw_unchanged_by_tracing", run_throw_unchanged),
    ("untraced_process_untouched", run_untraced_process_untouched),
    ("python_env_runtime_found_first", run_python_env_runtime),
    ("late_dlopen_probed_when_opened", run_late_dlopen),
    ("probe_keeps_builtin_role", run_probe_keeps_builtin_role),
    ("output_files_safe", run_output_files_safe),
    ("inspect_rejects_non_traces", run_inspect_rejects_non_traces),
    ("thread_id_and_bad_names", run_thread_tid_and_names),
    ("signals_hup_usr1_kill", run_signals),
    ("probe_matching_nothing_warns", run_probe_matches_nothing),
    ("damaged_capture_dropped_and_counted", run_damaged_capture),
    ("merge_pytorch_real_fixture", run_merge_pytorch),
    ("merge_refuses_unalignable", run_merge_refuses_unalignable),
    ("merge_bounded_memory", run_merge_bounded_memory),
    ("merge_hosts_and_our_json", run_merge_hosts_and_our_json),
    ("guest_power_spapr", run_guest_power_spapr),
    ("guest_z_big_endian", run_guest_z_big_endian),
    ("daemon_mounts_tracefs", run_daemon_mounts_tracefs),
    ("daemon_prometheus_matches_sim", run_daemon_prometheus),
    ("daemon_window_and_snapshot", run_daemon_window),
    ("daemon_window_newcomers_from_first_call", run_daemon_window_newcomers),
    ("daemon_window_container_root", run_daemon_window_container_root),
    ("daemon_sampling_and_triggers", run_daemon_sampling_triggers),
    ("daemon_bad_requests_and_sigkill", run_daemon_bad_requests),
    ("daemon_kubelet_allocations", run_daemon_kubelet_allocations),
    ("daemon_kubernetes_dirs", run_daemon_kubernetes_dirs),
    ("daemon_http_slow_clients", run_daemon_http_slow_clients),
    ("daemon_hostile_library_path", run_daemon_hostile_library_path),
    ("daemon_slow_library_off_main_loop", run_daemon_slow_library_off_main_loop),
    ("hostile_libraries_bounded", run_hostile_libraries_bounded),
    ("daemon_control_fair", run_daemon_control_fair),
    ("daemon_http_reconnect_storm", run_daemon_http_reconnect_storm),
    ("daemon_process_made_large", run_daemon_process_made_large),
    ("daemon_many_holders_many_files", run_daemon_many_holders_many_files),
    ("daemon_root_file_in_user_namespace", run_daemon_root_file_in_user_namespace),
    ("daemon_fake_vfio_ignored", run_daemon_fake_vfio_ignored),
    ("daemon_recorder_fair", run_daemon_recorder_fair),
    ("daemon_lone_job_keeps_its_last", run_daemon_lone_job_keeps_its_last),
    ("daemon_private_tmp_said", run_daemon_private_tmp_said),
    ("daemon_cost_on_demand", run_daemon_cost_on_demand),
    ("daemon_soak", run_daemon_soak),
    ("daemon_snapshot_cut_to_fit", run_daemon_snapshot_cut_to_fit),
    ("daemon_trigger_waits_for_room", run_daemon_trigger_waits_for_room),
    ("daemon_trigger_waits_at_stop", run_daemon_trigger_waits_at_stop),
    ("guest_kernel_6_1", run_guest_kernel),
    ("guest_hang_is_a_failure", run_guest_hang_is_a_failure),
    ("guest_vfio_one_card", run_guest_vfio_one_card),
    ("guest_vfio_two_cards", run_guest_vfio_two_cards),
    ("guest_vfio_shared_container", run_guest_vfio_shared_container),
    ("guest_two_processes_two_cards", run_guest_two_processes),
    ("guest_daemon_metrics_match_sim", run_guest_daemon),
    ("guest_daemon_no_syscall_tax", run_guest_daemon_no_syscall_tax),
]


def main():
    only = sys.argv[1:]
    passed = failed = skipped = 0
    reason = None
    if os.geteuid() != 0:
        reason = "needs root for BPF and uprobes"
    elif not os.path.exists("/sys/kernel/btf/vmlinux"):
        reason = "no kernel BTF"
    if not (os.path.exists(TOOL) and os.path.exists(SIM)):
        print(f"e2e: {TOOL} or {SIM} missing; hint: make")
        return 1
    for name, fn in TESTS:
        if only and name not in only:
            continue
        if reason:
            print(f"SKIP {name}: {reason}")
            skipped += 1
            continue
        tmp = tempfile.mkdtemp(prefix="sbt-e2e-")
        t0 = time.time()
        try:
            fn(tmp)
            print(f"ok   {name} ({time.time() - t0:.1f} s)")
            passed += 1
            shutil.rmtree(tmp, ignore_errors=True)
        except Skip as e:
            print(f"SKIP {name}: {e}")
            skipped += 1
        except Exception as e:  # noqa: BLE001 - report every failure the same way
            print(f"FAIL {name} ({time.time() - t0:.1f} s): {e}")
            if os.environ.get("E2E_VERBOSE"):
                traceback.print_exc()
            print(f"     kept {tmp}")
            failed += 1
    print(f"e2e: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
