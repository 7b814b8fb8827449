#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""Shared by the end-to-end tests: where the build is, the capture and
metrics readers, the checks that hold a capture against the simulator's
log, and what the test files of several products use.
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


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def long_sim(tmp):
    return " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "1000000", "--delay-us", "2000"))


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


# scripts/vm.sh's exit codes for its own failures (others are the command's)
VM_DOWNLOAD_FAILED, VM_HUNG = 3, 4


DRIVER_FUNCS = ("vfio_fops_unl_ioctl", "vfio_group_fops_unl_ioctl", "vfio_device_fops_unl_ioctl",
                "vfio_iommu_type1_ioctl", "vfio_pin_pages_remote", "vfio_unpin_pages_remote",
                "vfio_msihandler")


def hidden_runtime(tmp, where):
    """The workload as a library with the runtime beside it, in a directory
    no default search covers."""
    d = os.path.join(tmp, *where)
    os.makedirs(d)
    for n in ("libspyre_simrun.so", "libflex.so", "libsenlib.so"):
        shutil.copy(os.path.join(BUILD, "sim", n), d)
    return os.path.join(d, "libspyre_simrun.so")


def histograms_consistent(m, metric):
    """Each series of a Prometheus histogram: cumulative buckets, +Inf equal
    to _count and no less than any bucket; {label set: _count}."""
    out = {}
    for k, count in m.items():
        if k[0] != metric + "_count":
            continue
        buckets = sorted((float(dict(b[1])["le"]), v) for b, v in m.items() if b[0] == metric + "_bucket" and
                         b[1] - {("le", dict(b[1])["le"])} == k[1])
        assert buckets and buckets[-1][0] == float("inf"), (k, buckets)
        assert buckets[-1][1] == count, f"{dict(k[1])}: +Inf {buckets[-1][1]}, _count {count}"
        assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), f"{dict(k[1])}: buckets fall {buckets}"
        out[k[1]] = count
    return out


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
