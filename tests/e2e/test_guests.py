#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""End-to-end tests in QEMU guests: the real vfio-pci driver (x86, Debian's
6.1 and 6.12 kernels), IBM Power (ppc64le) and IBM Z (s390x).
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


def demo_says_one_path(tmp):
    """make demo's script writes its trace and names only that file, once told where to open it."""
    # The README's first command: the guest's summary named /out/demo.pftrace, a path in the guest,
    # and said to open it there; the demo said the host's path after. Now every path said is the
    # host's, and "open it in ui.perfetto.dev" comes once; the trace passes inspect.
    if not shutil.which("qemu-system-x86_64"):
        raise Skip("qemu-system-x86_64 missing (make deps installs it)")
    out = os.path.join(tmp, "demo.pftrace")
    r = subprocess.run([os.path.join(ROOT, "scripts", "demo.sh")], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, DEMO_OUT=out))
    text = r.stdout + r.stderr
    assert r.returncode == 0 and os.path.getsize(out) > 0, text[-3000:]
    assert "/out/demo.pftrace" not in text, text[-3000:]
    assert len([ln for ln in text.splitlines() if "ui.perfetto.dev" in ln]) == 1, text[-3000:]
    assert f"Perfetto trace {out}" in text and "ok: framing" in text, text[-3000:]


def guest_hang_is_a_failure(tmp):
    """A guest that hangs past vm.sh's --timeout is a failure with its console, never a skip."""
    # A guest whose command sleeps past vm.sh's --timeout is a failure with its last console lines,
    # never a skip.
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


def guest_power_spapr(tmp):
    """IBM Power: the ppc64le build in a pseries guest traces the simulator through the sPAPR IOMMU."""
    # IBM Power: the ppc64le cross build in a pseries guest (Debian 12's 6.12 kernel, TCG) tracing
    # the simulator driving an edu card through vfio-pci and the sPAPR TCE IOMMU. The runtime's
    # calls, nested, with their ioctls inside; every ioctl with Power's numbering and its arguments
    # (the DMA window, registered memory, MAP/UNMAP), each mapping in tce_iommu_ioctl and each
    # registration's pinning, every interrupt on its card, all through kprobes, the plan saying why
    # not fentry.
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


def guest_z_big_endian(tmp):
    """IBM Z: the big-endian s390x build in a guest traces the simulator on two stand-in cards."""
    # IBM Z: the s390x cross build (big-endian BPF objects, opened from the skeleton of their
    # little-endian twin) in an s390-ccw-virtio guest (Debian 12's 6.12 kernel, no BPF JIT) tracing
    # the simulator driving two stand-in cards (virtio-rng with iommu_platform=on: real DMA and
    # MSI-X through the zPCI IOMMU), each in its own type1 container. Every ioctl against the
    # simulator's log, mappings at the IOVA range zPCI gives, each in vfio's type1 handler with its
    # card, interrupts per card, all on kprobes with the plan saying why not fentry; the big-endian
    # capture, dumped and converted on this x86 host, is byte for byte what the guest made of it.
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

def guest_kernel_6_1(tmp):
    """The same BPF objects on Debian's 6.1 kernel in a guest capture what the simulator did there."""
    # The same BPF objects on a second kernel: Debian's 6.1 in a QEMU guest (scripts/vm.sh), with
    # QEMU's edu device bound to vfio-pci. The guest's capture must hold what the simulator did
    # there, as on the host.
    cmd = ("build/spyre-bpftrace -q -o /out/cap.sbt --vfio-path '/tmp/m/*' "
           "-c 'build/spyre-sim-run --threads 2 --jobs 4 --mock-dir /tmp/m --json /out/sim.json'")
    out, log = run_in_guest(tmp, 2, cmd, 120)
    assert "card 0000:00:03.0 bound to vfio-pci" in log, log
    events, _ = parse_dump(os.path.join(out, "cap.sbt"))
    release = [e for e in events if e["type"] == "host"][0]["release"]
    assert release.startswith("6.1."), f"ran on {release}, not the guest's 6.1 kernel"
    check_capture_matches_sim(events, json.load(open(os.path.join(out, "sim.json"))))


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


def guest_vfio_one_card(tmp):
    """One card under real VFIO: driver-level probes with fentry, then kprobes, and a late dlopen."""
    # One card; the driver-level probes with fentry, then with kprobes. A runtime dlopen()ed from a
    # directory nothing could know of, with no syscall tracepoint attached: do_filp_open saw the
    # open, the runtime was probed at once, and its later calls are in the capture.
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


def guest_vfio_two_cards(tmp):
    """Two cards in two containers: --device keeps one card's events; jobs land on their card."""
    # Two cards each in its own container (each mapping is one card's); then --device naming one
    # card keeps that card's driver events and interrupts only, and the process's syscall-level
    # ioctls all; then, with no wake-up watched, each stream still finds its card: by the buffer its
    # launches name, which the driver mapped in that card's container.
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


def guest_vfio_shared_container(tmp):
    """Two cards in one container: the interrupts alone tell which card ran each job."""
    # Two cards in one container: nothing but the interrupts tells which card a stream's jobs ran
    # on. The waiters of the eventfd each interrupt signals, read at the interrupt, and of the one
    # the woken thread writes next, at eventfd_write: by fentry, also when the runtime waits in
    # epoll_wait() (the eventfd in an epoll), and by a kprobe; the sched_waking program when asked
    # for: the same cards each way. With no kernel-function probe and no sched_waking, the
    # interrupt's own waiters still (the simulator's card thread), no program on any wake-up.
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


def guest_two_processes_two_cards(tmp):
    """Two processes, a card each: every device job lands on the card that ran it."""
    # Two cards, one process each (one rank per card): the tracer attaches with -p to one process
    # not yet started and one already driving its card, and every device job lands on the card that
    # ran it, per engine as each simulator counted, completed by that card's interrupt.
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
    # timed 1 in 16 (DMA map and unmap, IRQ setup always), each histogram whole
    timed = histograms_consistent(m, "spyre_vfio_ioctl_duration_seconds")
    for cmd in ("VFIO_IOMMU_MAP_DMA", "VFIO_IOMMU_UNMAP_DMA", "VFIO_DEVICE_SET_IRQS"):
        assert timed.get(frozenset({("cmd", cmd)})) == want.get(cmd), (cmd, timed, want)
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
    # every run of the MSI handler: counted, or counted as missed (a
    # kprobe does not fire inside another kprobe's handler)
    missed = int(m.get(("spyre_vfio_driver_call_missed_total", frozenset({("function", "vfio_msihandler")})), -1))
    assert calls.get("vfio_msihandler", 0) + missed == irqs, \
        f"MSI handler {calls.get('vfio_msihandler')} runs, {missed} missed, interrupts {irqs}"
    print(f"     {mech}: vfio_msihandler {calls.get('vfio_msihandler', 0)} runs counted, {missed} missed, "
          f"{irqs} interrupts")
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


def guest_daemon_metrics_match_sim(tmp):
    """The daemon in a guest with real VFIO counts each ioctl, mapping and interrupt per card."""
    # The daemon in the guest, where the simulator drives edu cards through real VFIO: one process,
    # two cards, a container each. Its metrics hold each ioctl, the bytes mapped for each card (by
    # the container the mapping went to) and each card's interrupts, as the simulator counted them,
    # and vfio's own functions as its driver-level programs counted them: fentry (what it chooses
    # there), then kprobes (what it falls back to). A detail window of a one-card job correlates as
    # record would.
    phase = ("build/spyre-bpftrace daemon -v --device 1234:11e8 --listen 127.0.0.1:946{n} --no-sampling "
             "--state-dir /tmp/state{n} --runtime-dir /tmp/run{n} --driver-probes {mode} 2> /out/daemon{n}.log & D=$!; "
             "for i in $(seq 120); do wget -q -O /dev/null http://127.0.0.1:946{n}/healthz && break; sleep 1; done; "
             "build/spyre-sim-run --backend vfio --threads 2 --jobs 3 --bytes 16384 --container-per-card "
             "--json /out/sim{n}.json; "
             "wget -q -O /out/metrics{n}.txt http://127.0.0.1:946{n}/metrics; {window}kill $D; wait $D; ")
    # then a window with a one-card job in it, its interrupts and the
    # wake-ups they cause as they come: the recorder must hold them in
    # the order they happened, as record does
    # (each job starts 2 s after its window is open, as when the test slept 2 s after asking: a
    # window waits for the last one's uprobes to go, which in this emulator can take longer)
    opened = ("for i in $(seq 300); do build/spyre-bpftrace ctl --runtime-dir /tmp/run1 status | "
              "grep -q '^window [^n]' && break; sleep 0.2; done; sleep 2; ")
    # (the first window knows no runtime yet: the job sets its card up, is seen and its runtime
    # read, and only then, 3 s on, runs its jobs, so that the jobs are all inside the window's
    # probes however slow the emulator reads the library)
    window = ("build/spyre-bpftrace ctl --runtime-dir /tmp/run1 record --seconds 10 -o /out/win1.sbt > /out/win1.txt & "
              "R=$!; " + opened + "(sleep 3; echo g) | build/spyre-sim-run --backend vfio --card 0000:00:03.0 "
              "--threads 1 --jobs 5 --wait-ready --bytes 16384 --json /out/one1.json > /dev/null; wait $R; "
              "wget -q -O /out/metrics1w.txt http://127.0.0.1:9461/metrics; "
              # and one process driving both cards, a container each
              "build/spyre-bpftrace ctl --runtime-dir /tmp/run1 record --seconds 8 -o /out/win2.sbt > /out/win2.txt & "
              "R=$!; " + opened + "build/spyre-sim-run --backend vfio --threads 2 --jobs 3 --bytes 16384 "
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


def guest_daemon_no_syscall_tax(tmp):
    """In the guest the daemon counts VFIO ioctls in vfio's handlers and loads no syscall tracepoint."""
    # In the x86 guest (vfio loaded, fentry there): the daemon counts VFIO ioctls in vfio's own
    # handlers and loads no syscall tracepoint program (hook_info says fentry); the same daemon made
    # to use the syscall tracepoints (--driver-probes off, the control) loads them. An unrelated
    # process's getppid loop is timed beside each and alone, interleaved, each figure the fastest of
    # three, and the medians printed: the emulator's noise (10-20%) is more than a 2% bound could
    # tell.
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
