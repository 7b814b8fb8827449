#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""End-to-end tests of what reads captures after the fact: convert, inspect,
and merge with real PyTorch profiler traces.
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

from lib import *  # noqa: F401,F403 - the shared helpers, paths and imports


def inspect_rejects_non_traces(tmp):
    """inspect refuses files that are not Perfetto traces, with a reason."""
    empty = os.path.join(tmp, "empty.pftrace")
    open(empty, "w").close()
    for path in (empty, "/dev/null", "/dev/zero", "/proc/self/maps"):
        r = subprocess.run([TOOL, "inspect", path], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, f"inspect {path}: exit {r.returncode}: {r.stdout[-300:]}"
        assert "FAILED" in r.stdout, r.stdout


def wrong_file_and_repeated_output_said(tmp):
    """A trace given where a capture belongs (and back), a library with nothing to probe and a repeated -o each get an error with what to run."""
    # report, convert and dump read the raw capture: given the .pftrace or .json record writes by
    # default, they say which it is and what to run instead (they said "bad magic"); inspect given
    # a capture or a JSON trace says so (it said "field 10 of wire type 3"); list on a binary with
    # no runtime function says so and fails (it printed nothing and exited 0); -o twice is an
    # error for record, convert, merge and ctl (the last one silently won).
    cap = os.path.join(ROOT, "tests", "torch", "fixture", "capture.sbt")
    pf, js = os.path.join(tmp, "t.pftrace"), os.path.join(tmp, "t.json")
    for out in (pf, js):
        r = subprocess.run([TOOL, "convert", cap, "-o", out], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr

    def said(args, rc, *want):
        r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == rc and all(w in r.stderr for w in want), f"{args}: exit {r.returncode}: {r.stderr}"
    for cmd in ("report", "dump", "convert"):
        extra = ["-o", os.path.join(tmp, "x.json")] if cmd == "convert" else []
        said([cmd, pf, *extra], 1, "a Perfetto trace, not a capture", "record with -o run.sbt")
        said([cmd, js, *extra], 1, "a JSON trace, not a capture", "record with -o run.sbt")
    said(["inspect", cap], 1, "is a spyre-bpftrace capture, not a Perfetto trace", f"convert {cap} -o")
    said(["inspect", js], 1, "is a JSON trace; inspect checks Perfetto traces")
    said(["list", os.path.join(BUILD, "spyre-syscall-loop")], 1, "no function of", "would be probed", "--probe")
    said(["-p", "1", "-o", "a.sbt", "-o", "b.pftrace"], 2, "-o given twice")
    said(["convert", cap, "-o", "a.json", "-o", "b.json"], 2, "-o given twice")
    said(["merge", js, cap, "-o", "a.json", "-o", "b.json"], 2, "-o given twice")
    said(["ctl", "--runtime-dir", tmp, "snapshot", "--last", "1m", "-o", "a.sbt", "-o", "b.sbt"], 2,
         "-o given twice")


def help_examples_whole(tmp):
    """Every --help's usage and examples lines are whole commands (none wrapped mid-command), and ctl snapshot is among them."""
    # argp wraps a line past 79 columns: an example broken in the middle cannot be pasted. In
    # every command's --help, each line of the USAGE and EXAMPLES blocks starts a command or is a
    # comment; the top-level help names ctl snapshot.
    for sub in ("", "record", "convert", "report", "inspect", "dump", "list", "merge", "daemon", "ctl"):
        text = subprocess.run([TOOL, *([sub] if sub else []), "--help"], capture_output=True, text=True,
                              timeout=60).stdout
        block = False
        for line in text.splitlines():
            if line.startswith(("USAGE:", "EXAMPLES:")):
                block = True
                continue
            if not line.strip():
                block = False
            if block:
                assert re.match(r"^ +(spyre-bpftrace |# |curl )", line), f"{sub or 'spyre-bpftrace'} --help: {line!r}"
    top = subprocess.run([TOOL, "--help"], capture_output=True, text=True, timeout=60).stdout
    assert "ctl snapshot" in top, top


def damaged_capture_dropped_and_counted(tmp):
    """convert drops a damaged record, counts it, warns, and writes a valid trace."""
    # A capture whose call ends before it begins (one field damaged): convert drops that record,
    # counts it, warns, and writes a valid trace.
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


def merge_pytorch_real_fixture(tmp):
    """merge puts a real torch.profiler run's ops on the tracer's timeline, linked to the calls inside."""
    # The committed real run (scripts/torch-fixture.sh): torch.profiler in a Debian 13 chroot in its
    # own pid namespace, the simulator started inside the op "spyre workload", all traced with -c.
    # Merged, the ops sit on the tracer's ids for the profiled thread, every simulator call lies
    # inside the op that started it, nothing partly overlaps, every arrow resolves.
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


def merge_hosts_and_our_json(tmp):
    """Our own Chrome JSON merges like its capture; two hosts' captures join on one clock."""
    # Our own Chrome JSON merges like its capture (it keeps the clock, process starts and namespace
    # ids); captures of two hosts join as one trace, each host's processes and cards apart, on one
    # clock.
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


def merge_bounded_memory(tmp):
    """merge of a 200,000-op kineto trace fits in a 128 MiB address space."""
    # A kineto trace of 200,000 ops (the real fixture's steps repeated, bench/gen_kineto.py) merges
    # within a 128 MiB address space, which a merge holding the JSON in memory exceeds (1.1 KiB per
    # op). The output under the limit is the output without it, byte for byte; every op is in it,
    # the first step's ops exactly as the fixture's own merge places them, each later step the same
    # moved by its span; the calls link as in the fixture's merge.
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


def merge_refuses_unalignable(tmp):
    """merge refuses a trace whose clock cannot be tied to the capture's, and writes nothing."""
    # A trace whose clock cannot be tied to the capture's is refused, with the reason, and no output
    # is written.
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
