#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""A PyTorch profiler (kineto) trace of any length, made from a real one:
the fixture's steps repeated back to back (times moved by the span of the
original, External ids, Ev Idx and flow ids moved past the last copy's),
its metadata once at the end, as kineto writes it. Times are moved as
decimal text, so every copy keeps kineto's nanosecond decimals exactly.

  gen_kineto.py --ops 200000 -o big.json [--from tests/torch/fixture/torch.json]
"""
import argparse
import decimal
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "tests", "torch", "fixture", "torch.json")


def fmt(v):
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {fmt(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    return json.dumps(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, required=True, help="at least this many ops (X events)")
    ap.add_argument("--from", dest="src", default=FIXTURE, help="the kineto trace to repeat")
    ap.add_argument("-o", "--output", default="-")
    a = ap.parse_args()
    with open(a.src) as f:
        doc = json.load(f, parse_float=decimal.Decimal, parse_int=decimal.Decimal)
    events = doc.pop("traceEvents")
    # what repeats: the ops and their flows; metadata and the profiler's
    # own spans once, after them
    body = [e for e in events if e.get("ph") in ("X", "s", "f") and e.get("cat") != "Trace"]
    tail = [e for e in events if e not in body]
    if not body:
        sys.exit(f"gen_kineto: no ops in {a.src}")
    per_copy = sum(e["ph"] == "X" for e in body)
    copies = max(1, -(-a.ops // per_copy))
    t0 = min(e["ts"] for e in body)
    span = max(e["ts"] + e.get("dur", 0) for e in body) - t0 + 1000
    ext = max(int(e.get("args", {}).get("External id", 0)) for e in body) + 1
    idx = max(int(e.get("args", {}).get("Ev Idx", 0)) for e in body) + 1
    fid = max(int(e.get("id", 0)) for e in body) + 1
    out = sys.stdout if a.output == "-" else open(a.output, "w")
    out.write("{\n")
    for k, v in doc.items():
        if k != "traceName":
            out.write(f"  {json.dumps(k)}: {fmt(v)},\n")
    out.write('  "traceEvents": [\n')
    first = True
    for c in range(copies):
        for e in body:
            e = dict(e)
            e["ts"] = e["ts"] + span * c
            if "id" in e:
                e["id"] = e["id"] + fid * c
            if "args" in e:
                e["args"] = dict(e["args"])
                for k, step in (("External id", ext), ("Ev Idx", idx)):
                    if k in e["args"] and e["args"][k] != 0:
                        e["args"][k] = e["args"][k] + step * c
            out.write(("" if first else ",\n") + "  " + fmt(e))
            first = False
    for e in tail:
        e = dict(e)
        if e.get("ph") == "X" and e.get("cat") == "Trace":
            e["dur"] = e["dur"] + span * (copies - 1)
        out.write(",\n  " + fmt(e))
    out.write("\n  ]")
    if "traceName" in doc:
        out.write(f',\n  "traceName": {fmt(doc["traceName"])}')
    out.write("\n}\n")
    if out is not sys.stdout:
        out.close()
    print(f"gen_kineto: {copies * per_copy} ops ({copies} copies of {per_copy})", file=sys.stderr)


if __name__ == "__main__":
    main()
