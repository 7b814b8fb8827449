# SPDX-License-Identifier: GPL-2.0-only
"""What a Spyre host installs: the .deb and .rpm (make deb, make rpm)
installed into scratch roots and run, and the OCI image (make image) run
the way deploy/kubernetes/daemonset.yaml runs it, with podman."""
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import time

from lib import BUILD, ROOT, SIM, Skip, check_calls_match_sim, our_bpf_objects, parse_dump, parse_metrics, wait_for
from test_daemon import ctl_status, free_port, http_get, window_of

VERSION = re.search(r"^VERSION\s*:=\s*(\S+)", open(os.path.join(ROOT, "Makefile")).read(), re.M).group(1)
PKG = os.path.join(ROOT, "build", "pkg")
IMAGE = "localhost/spyre-bpftrace"
# what the packages hold besides their own bookkeeping, as make install lays it out
HELD = ["usr/bin/spyre-bpftrace", "usr/share/man/man1/spyre-bpftrace.1.gz",
        "usr/share/bash-completion/completions/spyre-bpftrace",
        "usr/share/spyre-bpftrace/prometheus/scrape.yml", "usr/share/spyre-bpftrace/prometheus/spyre-alerts.yml",
        "usr/share/spyre-bpftrace/grafana/spyre-bpftrace.json",
        "usr/share/spyre-bpftrace/kubernetes/daemonset.yaml",
        "usr/share/spyre-bpftrace/kubernetes/networkpolicy.yaml"]
ELF_MACHINE = {"amd64": 62, "ppc64el": 21, "ppc64le": 21, "s390x": 22}


def make(*targets):
    """make TARGETS in the source tree; its output on failure."""
    r = subprocess.run(["make", "--no-print-directory", *targets], cwd=ROOT, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, f"make {' '.join(targets)}: {(r.stdout + r.stderr)[-3000:]}"
    return r.stdout


def elf_machine(path):
    """e_machine of an ELF file (either byte order)."""
    head = open(path, "rb").read(20)
    assert head[:4] == b"\x7fELF", f"{path} is not ELF"
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")


def run_foreign(path, arch):
    """path --version under qemu-user where it is installed; None when not."""
    qemu = shutil.which(f"qemu-{'ppc64le' if arch in ('ppc64el', 'ppc64le') else arch}-static")
    if not qemu:
        return None
    return subprocess.run([qemu, path, "--version"], capture_output=True, text=True, timeout=60).stdout


def packages_install_and_run(tmp):
    """The .deb and .rpm of each architecture hold the static binary, man page, unit, completion and deploy files, and run."""
    # make deb and make rpm (lintian and rpmlint: no errors), then each package installed into a
    # scratch root by dpkg and by rpm, as a host would: the files where make install puts them, the
    # binary answering --version (the foreign ones under qemu-user), the unit as systemd-analyze
    # verify reads it, bash completing the subcommands and a subcommand's options.
    for tool in ("dpkg", "rpm", "rpmbuild"):
        if not shutil.which(tool):
            raise Skip(f"no {tool}")
    out = make("deb", "rpm")
    assert "E:" not in out and ": E: " not in out, out
    for arch in ("amd64", "ppc64el", "s390x"):
        deb = os.path.join(PKG, f"spyre-bpftrace_{VERSION}_{arch}.deb")
        root = os.path.join(tmp, f"deb-{arch}")
        for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates"):
            os.makedirs(os.path.join(root, d))
        for f in ("var/lib/dpkg/status", "var/lib/dpkg/available"):
            open(os.path.join(root, f), "w").close()
        r = subprocess.run(["dpkg", f"--root={root}", "--force-architecture", "--force-script-chrootless", "-i", deb],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        for f in HELD + ["lib/systemd/system/spyre-bpftrace.service", "usr/share/doc/spyre-bpftrace/copyright"]:
            assert os.path.isfile(os.path.join(root, f)), f"{arch} .deb: no {f}"
        binary = os.path.join(root, "usr/bin/spyre-bpftrace")
        assert elf_machine(binary) == ELF_MACHINE[arch], f"{arch} .deb holds a binary for machine {elf_machine(binary)}"
        version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout if arch == "amd64" \
            else run_foreign(binary, arch)
        assert version is None or version.startswith(f"spyre-bpftrace {VERSION}"), f"{arch}: --version said {version!r}"
        print(f"     {arch} .deb: {os.path.getsize(deb)} bytes, --version "
              f"{'not run (no qemu-user)' if version is None else repr(version.strip())}")
        rpm_arch = {"amd64": "x86_64", "ppc64el": "ppc64le"}.get(arch, arch)
        rpm = os.path.join(PKG, f"spyre-bpftrace-{VERSION}-1.{rpm_arch}.rpm")
        rroot = os.path.join(tmp, f"rpm-{arch}")
        os.makedirs(rroot)
        r = subprocess.run(["rpm", "--root", rroot, "--initdb"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        r = subprocess.run(["rpm", "--root", rroot, "-i", "--nodeps", "--noscripts", "--ignorearch", rpm],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        for f in HELD + ["usr/lib/systemd/system/spyre-bpftrace.service"]:
            assert os.path.isfile(os.path.join(rroot, f)), f"{rpm_arch} .rpm: no {f}"
        assert open(os.path.join(rroot, "usr/bin/spyre-bpftrace"), "rb").read() == open(binary, "rb").read(), \
            f"the {rpm_arch} .rpm and .deb hold different binaries"
    # the unit: ExecStart where the package put the binary, and as systemd reads it
    unit = os.path.join(tmp, "deb-amd64", "lib/systemd/system/spyre-bpftrace.service")
    assert "ExecStart=/usr/bin/spyre-bpftrace daemon" in open(unit).read()
    if shutil.which("systemd-analyze"):
        # as systemd reads it on this host, its binary where the scratch root has it
        # (--man=no: the man page is installed in the scratch root, not here)
        copy = os.path.join(tmp, "spyre-bpftrace.service")
        with open(copy, "w") as f:
            f.write(open(unit).read().replace("/usr/bin/spyre-bpftrace", os.path.join(tmp, "deb-amd64/usr/bin/spyre-bpftrace")))
        r = subprocess.run(["systemd-analyze", "verify", "--man=no", copy], capture_output=True, text=True)
        assert r.returncode == 0 and "spyre-bpftrace.service" not in r.stderr, r.stdout + r.stderr
    # bash completion from the installed file, the installed binary giving the options
    root = os.path.join(tmp, "deb-amd64")
    comp = os.path.join(root, "usr/share/bash-completion/completions/spyre-bpftrace")

    def complete(*words):
        script = (f"source {shlex.quote(comp)}; COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); "
                  f"COMP_CWORD={len(words) - 1}; _spyre_bpftrace; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        env = dict(os.environ, PATH=os.path.join(root, "usr/bin") + ":" + os.environ["PATH"])
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env).stdout.split("\n")
    assert "ctl" in complete("spyre-bpftrace", "c"), complete("spyre-bpftrace", "c")
    assert "snapshot" in complete("spyre-bpftrace", "ctl", "sn")
    assert "--sample-ioctls=" in complete("spyre-bpftrace", "daemon", "--sample-i"), \
        complete("spyre-bpftrace", "daemon", "--sample-i")


# podman on machines like this one (docs/install.md): runc (crun refuses
# hybrid cgroups) and no default ulimits (no CAP_SYS_RESOURCE to set them)
CONTAINERS_CONF = "[containers]\ndefault_ulimits = []\n"


def podman(tmp, *args, check=True, timeout=120):
    conf = os.path.join(tmp, "containers.conf")
    if not os.path.exists(conf):
        with open(conf, "w") as f:
            f.write(CONTAINERS_CONF)
    r = subprocess.run(["podman", "--runtime", "runc", *args], capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, CONTAINERS_CONF=conf))
    assert not check or r.returncode == 0, f"podman {' '.join(args)}: {r.stdout}{r.stderr}"
    return r


def job_image(tmp, name):
    """An image FROM scratch holding the simulator, its runtime libraries
    and the C library they need: a job whose runtime is only inside its
    container's root."""
    ctx = os.path.join(tmp, "jobctx")
    root = os.path.join(ctx, "rootfs")
    files = [SIM, os.path.join(BUILD, "sim", "libflex.so"), os.path.join(BUILD, "sim", "libsenlib.so")]
    for f in files:
        for line in subprocess.run(["ldd", f], capture_output=True, text=True).stdout.splitlines():
            m = re.search(r"(/\S+) \(0x", line)
            if m and not m.group(1).startswith(BUILD):
                dst = os.path.join(root, m.group(1).lstrip("/"))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy(os.path.realpath(m.group(1)), dst)
    os.makedirs(os.path.join(root, "job", "sim"))
    shutil.copy(SIM, os.path.join(root, "job"))
    for f in files[1:]:
        shutil.copy(f, os.path.join(root, "job", "sim"))
    with open(os.path.join(ctx, "Containerfile"), "w") as f:
        f.write("FROM scratch\nCOPY rootfs/ /\nENTRYPOINT [\"/job/spyre-sim-run\"]\n")
    podman(tmp, "build", "-q", "-t", name, ctx)


def image_runs_as_daemonset(tmp):
    """The image, run as the DaemonSet runs it, counts the simulator's ioctls, snapshots, traces a job in its own container, leaves nothing."""
    # make image builds an image per architecture and a manifest list. The amd64 one runs as
    # deploy/kubernetes/daemonset.yaml runs it: host pid, its capabilities only (no privileged),
    # read-only root, the host's BTF and tracefs read-only, the state directory from the host and
    # the runtime directory in memory. /metrics counts every VFIO ioctl the simulator made on the
    # host; `ctl snapshot` through `podman exec` writes a trace `inspect` passes; a job in a
    # container of its own (its runtime only in its root) started inside a `ctl record` window is
    # traced whole; stopping the container leaves no BPF program, link or uprobe of ours. The
    # ppc64le and s390x images hold their architecture's binary (run by qemu-user where present).
    if not shutil.which("podman"):
        raise Skip("no podman")
    make("image")
    for arch, machine in (("amd64", 62), ("ppc64le", 21), ("s390x", 22)):
        tag = f"{IMAGE}:{VERSION}-{arch}"
        info = json.loads(podman(tmp, "image", "inspect", tag).stdout)[0]
        assert info["Architecture"] == arch and info["Os"] == "linux", (arch, info["Architecture"], info["Os"])
        assert info["Labels"]["org.opencontainers.image.version"] == VERSION, info["Labels"]
        cid = podman(tmp, "create", "--arch", arch, tag).stdout.strip()
        try:
            podman(tmp, "cp", f"{cid}:/usr/bin/spyre-bpftrace", os.path.join(tmp, f"bin-{arch}"))
        finally:
            podman(tmp, "rm", cid, check=False)
        assert elf_machine(os.path.join(tmp, f"bin-{arch}")) == machine, arch
        if arch != "amd64":
            v = run_foreign(os.path.join(tmp, f"bin-{arch}"), arch)
            assert v is None or v.startswith(f"spyre-bpftrace {VERSION}"), v
    # the manifest list, in the OCI archive make image writes: the three images' platforms
    with tarfile.open(os.path.join(ROOT, "build", "image", f"spyre-bpftrace-{VERSION}.oci.tar")) as t:
        blob = lambda d: json.load(t.extractfile("blobs/" + d.replace(":", "/")))  # noqa: E731
        index = json.load(t.extractfile("index.json"))
        listed = blob(index["manifests"][0]["digest"])
        assert sorted(m["platform"]["architecture"] for m in listed["manifests"]) == ["amd64", "ppc64le", "s390x"], \
            listed
        for m in listed["manifests"]:  # each image whole in the archive
            assert blob(m["digest"])["layers"], m
    state, mock = os.path.join(tmp, "state"), os.path.join(tmp, "mock")
    os.makedirs(state)
    os.makedirs(mock)
    port, name = free_port(), f"sbt-e2e-{os.getpid()}"
    # the DaemonSet's own capabilities, read from it
    caps = re.search(r"add: \[([A-Z_, ]+)\]", open(os.path.join(ROOT, "deploy/kubernetes/daemonset.yaml")).read())
    caps = ",".join(c.strip() for c in caps.group(1).split(","))
    podman(tmp, "run", "-d", "--name", name, "--pid", "host", "--network", "host",
           "--cap-drop", "all", "--cap-add", caps,
           "--read-only", "--security-opt", "seccomp=/usr/share/containers/seccomp.json",
           "-v", "/sys/kernel/btf:/sys/kernel/btf:ro", "-v", "/sys/kernel/tracing:/sys/kernel/tracing:ro",
           "-v", f"{state}:/var/lib/spyre-bpftrace", "--tmpfs", "/run/spyre-bpftrace:mode=0700",
           "-v", f"{tmp}:{tmp}", f"{IMAGE}:{VERSION}-amd64",
           "daemon", "--listen", f"127.0.0.1:{port}", "--no-kubelet", "--no-sampling", "--no-triggers",
           "--vfio-path", tmp, "-v")
    job = f"sbt-e2e-job-{os.getpid()}"
    try:
        def up():
            if podman(tmp, "inspect", "-f", "{{.State.Running}}", name).stdout.strip() != "true":
                raise AssertionError("the daemon's container stopped: " + podman(tmp, "logs", name).stderr[-3000:])
            try:
                return http_get(f"http://127.0.0.1:{port}/healthz", 1) == (200, "ok\n")
            except Exception:  # noqa: BLE001 - not up yet
                return False
        wait_for(up, 60, "the daemon in its container to serve /healthz")
        # as kubectl exec POD -- spyre-bpftrace ctl ... would
        ctl = ["env", f"CONTAINERS_CONF={os.path.join(tmp, 'containers.conf')}", "podman", "--runtime", "runc",
               "exec", name, "spyre-bpftrace", "ctl"]
        r = subprocess.run([SIM, "--mock-dir", mock, "--threads", "2", "--jobs", "4", "--json",
                            os.path.join(tmp, "sim.json")], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        sim = json.load(open(os.path.join(tmp, "sim.json")))
        want = {}
        for io in sim["ioctls"]:
            want[io["cmd"]] = want.get(io["cmd"], 0) + 1

        def got():
            m = parse_metrics(http_get(f"http://127.0.0.1:{port}/metrics")[1])
            return {dict(k[1])["cmd"]: int(v) for k, v in m.items() if k[0] == "spyre_vfio_ioctls_total"}
        wait_for(lambda: got() == want, 20, f"the daemon's counts {got()} to be the simulator's {want}")
        snap = "/var/lib/spyre-bpftrace/snap.pftrace"
        r = subprocess.run(ctl + ["snapshot", "--last", "60s", "-o", snap], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and r.stdout.startswith(f"ok {snap}"), r.stdout + r.stderr
        host_snap = os.path.join(state, "snap.pftrace")
        r = subprocess.run([os.path.join(BUILD, "spyre-bpftrace"), "inspect", host_snap], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        man = json.load(open(host_snap + ".manifest.json"))
        assert sim["pid"] in man["processes"], man["processes"]
        # a job in its own container, inside a window
        job_image(tmp, f"{job}-image")
        win = "/var/lib/spyre-bpftrace/win.sbt"
        rec = subprocess.Popen(ctl + ["record", "--seconds", "8", "-o", win], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        wait_for(lambda: ctl_status(ctl)["window"].startswith("request"), 30, "the window to open")
        time.sleep(0.05)
        # the first job's runtime is read at its first VFIO ioctl (a file only in its container's
        # root): its calls from then on; the second's, the same file, from its first call
        jsims = []
        for i, jobs in enumerate((400, 20)):
            jmock = os.path.join(tmp, f"jobmock{i}")
            os.makedirs(jmock)
            podman(tmp, "run", "--rm", "--name", f"{job}-{i}", "-v", f"{tmp}:{tmp}", f"{job}-image", "--mock-dir",
                   jmock, "--threads", "2", "--jobs", str(jobs), "--json", os.path.join(tmp, f"job{i}.json"),
                   timeout=120)
            jsims.append(json.load(open(os.path.join(tmp, f"job{i}.json"))))
            if i == 0:
                wait_for(lambda: "library    -> /job/sim/libflex.so" in podman(tmp, "logs", name).stderr, 20,
                         "the daemon to read the job's runtime")
                time.sleep(0.5)  # its probes go on just after
        o, e = rec.communicate(timeout=90)
        assert rec.returncode == 0 and o.startswith(f"ok {win}"), o + e
        events, _ = parse_dump(os.path.join(state, "win.sbt"), outputs=False)
        man = json.load(open(os.path.join(state, "win.sbt.manifest.json")))
        _, traced = window_of(man)
        # each job has a pid namespace of its own: the simulator logs its pids there, the trace the
        # host's; the window's processes in the order it saw them, their threads in the order made
        assert len(traced) == 2, f"the window traced {sorted(traced)}, not the two containers' jobs"
        for k, (host_pid, t) in enumerate(sorted(traced.items(), key=lambda p: p[1]["seen_boottime_ns"])):
            calls = [e for e in events if e["type"] in ("call_enter", "call_exit") and e["tgid"] == host_pid]
            host_tids = sorted({e["tid"] for e in calls})
            ns_tids = sorted({tid for tid, _, _ in jsims[k]["call_log"]})
            assert len(host_tids) == len(ns_tids) and host_tids[0] == host_pid, \
                f"job {k}: threads traced {host_tids}, the job's {ns_tids} in its namespace"
            to_ns = dict(zip(host_tids, ns_tids))
            check_calls_match_sim([dict(e, tid=to_ns[e["tid"]]) for e in calls], jsims[k], partial=k == 0)
            if k == 1:
                assert t["calls_may_be_missing_ns"] == 0, t
                print(f"     the second job in its own container (PID {jsims[k]['pid']} there, {host_pid} on the "
                      f"host): {len(calls) // 2} calls traced, all the simulator's")
    finally:
        podman(tmp, "rm", "-f", f"{job}-0", f"{job}-1", check=False)
        podman(tmp, "stop", "-t", "30", name, check=False, timeout=90)
        logs = podman(tmp, "logs", name, check=False).stderr
        podman(tmp, "rm", "-f", name, check=False)
        podman(tmp, "rmi", "-f", f"{job}-image", check=False)
    assert "stopping on Terminated" in logs, logs[-3000:]
    ids, links, uprobes = our_bpf_objects()
    assert not ids and not links and not uprobes, f"left after the container stopped: {ids} {links} {uprobes}"

