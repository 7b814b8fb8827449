#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""End-to-end tests of `record` (-p, -c) and `list`: the real BPF programs on
this machine's kernel tracing the Spyre simulator, each capture held
against what the simulator says it did.
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


def c_multithread_matches_sim(tmp):
    """-c on a multithreaded simulator run: every call, ioctl and job the simulator logged is in the trace."""
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


def p_attach_matches_sim(tmp):
    """-p on a simulator waiting to start: every call, ioctl and job it then made is in the capture."""
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


def end_record(path):
    events, err = parse_dump(path)
    ends = [e for e in events if e["type"] == "end"]
    return events, ends, err


def duration_ends_with_readable_capture(tmp):
    """-d ends the recording on time with a capture that reads back whole."""
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


def duration_while_attaching(tmp):
    """-d shorter than attaching takes stops at the deadline, and the command never runs untraced."""
    # -d shorter than attaching takes: the tracer stops at the deadline, not after every probe; the
    # command, never started, does not run untraced.
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


def sigint_flushes_capture(tmp):
    """Ctrl-C ends a recording with everything captured so far written."""
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


def sigint_command_ignores_term(tmp):
    """Ctrl-C ends the recording even when the -c command ignores SIGTERM."""
    # Ctrl-C ends the recording even when the -c command ignores SIGTERM: the trace is written, the
    # command gets SIGKILL 5 s later, and the tracer says so.
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


def static_command_runs_once(tmp):
    """-c with a static program runs it once, traced."""
    # -c with a static program: its libraries are listed by its own dynamic loader, of which it has
    # none, so nothing runs before the tracer starts it, traced, once (LD_TRACE_LOADED_OBJECTS on
    # the program itself ran a static one for real, untraced, and waited for it).
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


def sigkill_leaves_nothing_behind(tmp):
    # the kernel frees programs of earlier tests asynchronously
    """SIGKILL of the tracer leaves no BPF program, link or probe behind."""
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


def command_status_passed_on(tmp):
    """record -c exits with its command's status when the command failed, and says so."""
    # As time and perf stat do: a script or CI job sees its command fail (it used to exit 0).
    r = subprocess.run([TOOL, "-c", f"{SIM} --no-such-option", "-o", os.path.join(tmp, "c.sbt")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 64, f"exit {r.returncode}: {r.stderr}"
    assert "command exited with status 64 (and so does spyre-bpftrace)" in r.stderr, r.stderr


def vfio_path_hinted(tmp):
    """A job whose ioctls carry VFIO's numbers on files record does not know gets a hint at --vfio-path, which takes a glob or a directory."""
    # The simulator's mock card is regular files: without --vfio-path its ioctls are no VFIO
    # file's, and record said "0 ioctls" with no word why. Now the summary counts them and names
    # the option; with it, the hint is gone and the ioctls are in the capture.
    os.makedirs(os.path.join(tmp, "mock"))
    cap = os.path.join(tmp, "h.sbt")
    r = subprocess.run([TOOL, "-c", " ".join(sim_cmd(tmp, "--jobs", "3")), "-o", cap], capture_output=True,
                       text=True, timeout=120)
    sim = json.load(open(os.path.join(tmp, "sim.json")))
    m = re.search(r"(\d+) ioctls carried VFIO's numbers on files not known as VFIO's.*hint: --vfio-path", r.stderr)
    assert r.returncode == 0 and m and int(m.group(1)) == len(sim["ioctls"]), r.stderr
    # the glob and, as the daemon takes it, the directory
    for path in (os.path.join(tmp, "mock", "*"), os.path.join(tmp, "mock") + "/"):
        r = subprocess.run([TOOL, "-c", " ".join(sim_cmd(tmp, "--jobs", "3")), "-o", cap, "--vfio-path", path],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and "carried VFIO's numbers" not in r.stderr, r.stderr
        events, _ = parse_dump(cap, outputs=False)
        want = len(json.load(open(os.path.join(tmp, "sim.json")))["ioctls"])
        assert len([e for e in events if e["type"] == "ioctl"]) == want, f"--vfio-path {path}"


def report_as_data(tmp):
    """report --format json validates against docs/report.schema.json and holds the simulator's calls and ioctls; csv says the same."""
    # For scripts and CI: a recorded run's report as JSON (schema-checked) counts per runtime
    # function what the simulator logged, its ioctls and their failures; the CSV's rows equal the
    # JSON's figures; an unknown --format is a usage error.
    import csv
    import jsonschema
    os.makedirs(os.path.join(tmp, "mock"))
    cap = os.path.join(tmp, "r.sbt")
    r = subprocess.run([TOOL, "-c", " ".join(sim_cmd(tmp, "--threads", "2", "--jobs", "5")), "-o", cap,
                        "--vfio-path", os.path.join(tmp, "mock", "*"), "-q"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    sim = json.load(open(os.path.join(tmp, "sim.json")))
    r = subprocess.run([TOOL, "report", cap, "--format", "json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    jsonschema.validate(rep, json.load(open(os.path.join(ROOT, "docs", "report.schema.json"))))
    want = {}
    for _, name, _ in sim["call_log"]:
        want[name] = want.get(name, 0) + 1
    assert {f["name"]: f["calls"] for f in rep["functions"]} == want, rep["functions"]
    assert all(sum(c for _, c in f["histogram"]) == f["calls"] for f in rep["functions"])
    assert rep["run"]["ioctls"] == len(sim["ioctls"]) and rep["run"]["lost"] == 0, rep["run"]
    fails = {}
    for io in sim["ioctls"]:
        if io["ret"] < 0:
            fails[io["cmd"]] = fails.get(io["cmd"], 0) + 1
    assert {e["cmd"]: e["count"] for e in rep["ioctl_errors"]} == fails, rep["ioctl_errors"]
    r = subprocess.run([TOOL, "report", cap, "--format", "csv"], capture_output=True, text=True, timeout=60)
    rows = list(csv.DictReader(r.stdout.splitlines()))
    assert r.returncode == 0 and rows, r.stderr
    got = {row["name"]: int(float(row["value"])) for row in rows if row["section"] == "function" and
           row["metric"] == "calls"}
    assert got == want, got
    assert any(row["section"] == "run" and row["metric"] == "ioctls" and int(float(row["value"])) == len(sim["ioctls"])
               for row in rows)
    run_error(["report", cap, "--format", "xml"], 2, "unknown report format 'xml'")


def diff_finds_planted_regression(tmp):
    """diff finds a planted slowdown with its sign and beyond noise (from captures or a report's JSON), two runs of one workload within noise, and --fail-if exits 3."""
    # Three recorded runs of the simulator, after one not kept (the first run after a build pays
    # the page cache's faults): two alike (the card's jobs 200 us), one with the regression
    # planted (2000 us a job, so synchronize, which waits for them, is slower). diff of
    # the alike pair: every function within noise, --fail-if quiet; of the planted pair:
    # synchronize slower beyond noise (z > 0, p50 up), --fail-if 'p50>+10%' exits 3 naming it, and
    # the JSON form says the same.
    caps = []
    for i, delay in enumerate((200, 200, 200, 2000)):
        os.makedirs(os.path.join(tmp, f"m{i}"))
        cap = os.path.join(tmp, f"run{i}.sbt")
        cmd = [SIM, "--mock-dir", os.path.join(tmp, f"m{i}"), "--threads", "1", "--jobs", "40", "--delay-us", str(delay)]
        r = subprocess.run([TOOL, "-c", " ".join(cmd), "-o", cap, "-q"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        caps.append(cap)
    caps = caps[1:]

    def diff(a, b, *extra):
        r = subprocess.run([TOOL, "diff", a, b, *extra], capture_output=True, text=True, timeout=60)
        return r
    same = diff(caps[0], caps[1], "--format", "json", "--fail-if", "p50>+10%", "--fail-if", "p99>+10%")
    d = json.loads(same.stdout)
    assert same.returncode == 0 and d["functions"], same.stdout + same.stderr
    moved = [(f["name"], f["verdict"], f["z"]) for f in d["functions"] if f["verdict"] != "within noise"]
    assert not moved, f"two runs of one workload differ beyond noise: {moved}"
    widest = max(abs(f["p50"]["change_pct"]) for f in d["functions"])
    planted = diff(caps[0], caps[2], "--fail-if", "p50>+10%")
    assert planted.returncode == 3 and "flex::RuntimeStream::synchronize p50" in planted.stderr, \
        planted.stdout + planted.stderr
    row = [ln for ln in planted.stdout.splitlines() if "flex::RuntimeStream::synchronize" in ln]
    assert row and row[0].endswith("slower"), planted.stdout
    d = json.loads(diff(caps[0], caps[2], "--format", "json").stdout)
    sync = [f for f in d["functions"] if f["name"] == "flex::RuntimeStream::synchronize"][0]
    assert sync["verdict"] == "slower" and sync["z"] > 3.29 and sync["p50"]["change_pct"] > 100, sync
    # a kept report's JSON in place of the first capture: the same verdict, the same figures
    rep = os.path.join(tmp, "run0.report.json")
    with open(rep, "w") as f:
        subprocess.run([TOOL, "report", caps[0], "--format", "json"], stdout=f, check=True, timeout=60)
    d2 = json.loads(diff(rep, caps[2], "--format", "json").stdout)
    sync2 = [f for f in d2["functions"] if f["name"] == "flex::RuntimeStream::synchronize"][0]
    assert sync2 == sync, (sync2, sync)
    print(f"     synchronize p50 {sync['p50']['before_ns'] / 1e3:.0f} -> {sync['p50']['after_ns'] / 1e3:.0f} us, "
          f"z {sync['z']:.1f}; the alike pair: every function within noise (medians {widest:.1f}% apart at most)")


def errors_one_line_with_hint(tmp):
    """Bad input gets one error line with a hint and a non-zero exit."""
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


def output_files_safe(tmp):
    """Outputs are never written through a symlink, are 0600, and never replace a device or FIFO."""
    # Outputs are never written through a symlink, are 0600 whatever the umask, and a convert of a
    # missing input leaves the output as it was. A device or a FIFO as the output is refused, not
    # replaced (a trace is renamed over its path: /dev/null became a regular file once).
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


def thread_id_and_bad_names(tmp):
    """-p with a thread id traces its process; invalid UTF-8 thread names leave outputs valid."""
    # -p given a thread id traces its process (and says so); a thread that named itself with invalid
    # UTF-8 leaves both outputs valid.
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


def signals_hup_usr1_kill(tmp):
    """SIGHUP ends a recording as SIGTERM does, SIGUSR1 prints status, SIGKILL takes the command along."""
    # SIGHUP (the terminal closed) ends the recording as SIGTERM does; SIGUSR1 prints a status line
    # and goes on; SIGKILL of the tracer takes the -c command with it.
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


def probe_matching_nothing_warns(tmp):
    """A --probe that matches nothing is warned about."""
    cmd = " ".join(shlex.quote(a) for a in sim_cmd(tmp, "--jobs", "1"))
    r = subprocess.run([a for a in tracer(tmp, "--probe", "libnothere.so:foo*", "--probe",
                                          "libflex.so:zzz*", "-c", cmd) if a != "-q"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for spec in ("libnothere.so:foo*", "libflex.so:zzz*"):
        assert f"--probe '{spec}' matched no function" in r.stderr, r.stderr


def probe_option(tmp):
    """--probe with a library name and a glob adds only what it matches."""
    # --probe with a library name and a glob adds only what it matches.
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


def follows_children(tmp):
    """A -c shell's forked workload is followed from its fork on, ioctls and calls."""
    # A -c shell that forks the workload: the child is followed from its fork on (BPF marks it
    # traced there: every ioctl it makes is captured), and its runtime probes go on when the loader
    # reads the fork record. The calls it made from then on are all there, in order, none invented,
    # and the summary says how long after the fork the probes came (calls made before are not in the
    # trace: docs/probes.md, "Which processes").
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


def loss_is_counted(tmp):
    """What does not fit a too-small ring buffer is counted exactly and marked in the capture."""
    # A ring buffer far too small for four busy threads: what does not fit is counted, exactly, and
    # marked in the capture.
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


def irq_filter(tmp):
    """--irq N records that interrupt's handlers and no other."""
    # --irq N records that interrupt's handlers, and no other interrupt.
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


def verbose_plan(tmp):
    """-v prints the attach plan: which mechanism each probe role got."""
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


THROW = os.path.join(BUILD, "spyre-sim-throw")
CXX_FLEX = os.path.join(BUILD, "sim", "cxx", "libflex.so")


def throw_unchanged_by_tracing(tmp):
    """A runtime call that throws behaves the same traced as untraced."""
    # A C++ runtime call that throws, caught by its caller: the app does the same traced as untraced
    # (a uretprobe here aborts it with 'terminate called'), each throw is a call without return, and
    # functions that return twice or switch stacks are refused with a reason, not fatal.
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


def untraced_process_untouched(tmp):
    """-p A leaves B, running the same runtime, without a breakpoint or a probe run."""
    # -p A while B runs the same runtime: B's copy of the library holds no breakpoint (A's does), no
    # probe runs in B, and A is traced in full.
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


def python_env_runtime_found_first(tmp):
    """A runtime dlopen()ed from a Python package directory is found before the program starts."""
    # A Python program that dlopen()s the runtime from one of its package directories on import (as
    # torch-spyre does): the tracer finds it there before the program starts, and every call is in
    # the capture.
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


def late_dlopen_probed_when_opened(tmp):
    """A runtime dlopen()ed from an unknown directory is probed when it is opened."""
    # A launcher that dlopen()s the runtime from a directory nothing could know of: the tracer sees
    # the open, probes the file at once and says in the summary from when on calls are seen. What it
    # captured is exactly the calls each thread made from some point on.
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


def probe_keeps_builtin_role(tmp):
    """--probe naming a built-in function keeps its role unless =ROLE says otherwise."""
    # --probe naming a built-in function without =ROLE keeps its role (a wait stays a wait, so jobs
    # complete); with =ROLE the role is that.
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


def hostile_libraries_bounded(tmp):
    """Libraries crafted against their reader are read in bounded memory and time, or refused."""
    # Libraries crafted against their reader, as a card holder may map or put on its
    # LD_LIBRARY_PATH: a sparse 1 GiB file (the reader once read it whole: 1 GB resident), 4,096
    # cold parts each as large as the file (once a copy each: 8 GB), 65,534 program headers before
    # the one that maps 150,000 symbols (once stuck for minutes). `list` reads each within a bounded
    # memory and time and says what it refused; `record -d 3` on a job with all three on its
    # LD_LIBRARY_PATH ends its capture on time, with the job's runtime calls, in bounded memory.
    dirs = hostile_libraries(tmp)
    for kind, d in dirs.items():
        rc, out, err, took, peak = run_with_peak([TOOL, "list", os.path.join(d, "libflex.so.9")], 60)
        print(f"     list {kind}: {took:.2f} s, peak {peak >> 20} MiB, exit {rc}")
        assert peak < 64 << 20, f"list {kind}: {peak >> 20} MiB resident"
        assert took < 20, f"list {kind}: {took:.1f} s"
        # (a library with nothing to probe is said, and fails)
        expect = {"sparse": (1, "would be probed"), "cold": (0, "its cold part of 2093056 bytes is over the cap"),
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
