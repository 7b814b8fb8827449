# SPDX-License-Identifier: GPL-2.0-only
"""A small model under torch.profiler that also starts the Spyre simulator
as a child, inside an op of its own: the PyTorch half of the merge fixture
(scripts/torch-fixture.sh runs it traced by spyre-bpftrace -c).

It also runs the simulator's runtime in-process, through ctypes, inside an
op on the profiled thread, as torch-spyre does: those calls must land inside
that op. usage:
  model.py TORCH.json INFO.json SIM MOCKDIR SIM.json LIBSIMRUN.so INPROC.json
"""
import ctypes
import json
import os
import subprocess
import sys
import threading
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

out, info, sim, mockdir, sim_json, simrun, inproc_json = sys.argv[1:8]
runtime = ctypes.CDLL(simrun)  # loaded with the model, before any work


def run_in_process(*args):
    argv = [b"spyre-sim-run"] + [a.encode() for a in args]
    rc = runtime.spyre_sim_run_main(len(argv), (ctypes.c_char_p * len(argv))(*argv))
    assert rc == 0, f"in-process simulator failed: {rc}"


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
x = torch.randn(16, 64)

with profile(activities=[ProfilerActivity.CPU]) as prof:
    for step in range(2):
        with record_function(f"step {step}"):
            model(x).sum().backward()
    # the simulator's runtime calls and device jobs belong to this op; it
    # starts its work a moment after loading its runtime, as a real job
    # does after its imports (the tracer probes a library when it is opened)
    with record_function("spyre workload"):
        child = subprocess.Popen([sim, "--mock-dir", mockdir, "--threads", "2", "--jobs", "3",
                                  "--wait-stdin", "--json", sim_json], stdin=subprocess.PIPE)
        time.sleep(0.1)
        child.communicate(b"go")
        assert child.returncode == 0, f"simulator failed: {child.returncode}"
    with record_function("spyre in-process"):
        with record_function("upload and run"):
            run_in_process("--mock-dir", mockdir, "--jobs", "2", "--json", inproc_json)
    with record_function("after"):
        model(x)
prof.export_chrome_trace(out)
# who the profiler says it was, in its own pid namespace
with open(info, "w") as f:
    json.dump({"pid": os.getpid(), "tid": threading.get_native_id(),
               "torch": torch.__version__}, f)
