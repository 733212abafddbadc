#!/usr/bin/env python3
"""zsim's collective calls against DeepSpeed's, per (phase, op, group size), on the recorded multi-rank cases.

    python3 validate/deepspeed/compare_calls.py                   # every multi-rank run of the record
    python3 validate/deepspeed/compare_calls.py l150m-z3-w2-mb4-s2048-sdpa --sizes   # one case, each payload too
    python3 validate/deepspeed/compare_calls.py --check           # exit 1 where a count or the bytes differ

For each run JSON (validate/results/h200-deepspeed/runs/*.json, format in README.md) with world > 1 and a recorded
collectives step, it runs `zsim plan cases/<name>/scenario.yaml --emit-schedule` with one and with two optimizer
steps; the second step's ops (the two-step schedule less the one-step one, both deterministic) are zsim's steady
state, as the harness records DeepSpeed's fourth step. It prints, per (phase, op, group size), the calls per step
and the bytes per step of both, and with --sizes the calls per payload.

Bytes are the schedule's (docs/schedule-format.md): an all-gather's output, a reduce-scatter's input, an all-reduce's
buffer, an all-to-all's send buffer; the run's figures are mapped the same way (all_gather*: output_bytes,
everything else: input_bytes). A call matches when the counts are equal and the bytes within 0.5%.
Standard library only.
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

from .. import ROOT as HERE  # validate/deepspeed/
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
RUNS = os.path.join(ROOT, "validate", "results", "h200-deepspeed", "runs")
PHASES = ("forward", "backward", "step")

# torch.distributed's function -> the schedule's collective
OPS = {
    "all_gather_into_tensor": "all_gather", "_all_gather_base": "all_gather", "all_gather": "all_gather",
    "all_gather_coalesced": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter", "reduce_scatter": "reduce_scatter", "all_reduce": "all_reduce",
    "all_reduce_coalesced": "all_reduce", "all_to_all_single": "all_to_all", "all_to_all": "all_to_all",
    "broadcast": "broadcast", "reduce": "reduce",
}
DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64", "int8": "int8",
          "uint8": "int8"}


def measured_calls(run):
    """[(phase, op, group_size, bytes, dtype, count)] of rank 0's collectives step, or None."""
    ranks = run.get("ranks") or []
    if not ranks or not isinstance(ranks[0].get("collectives"), dict) or "calls" not in ranks[0]["collectives"]:
        return None
    out = []
    for c in ranks[0]["collectives"]["calls"]:
        op = OPS.get(c["op"], c["op"])
        b = c["output_bytes"] if op == "all_gather" else c["input_bytes"]
        out.append((c["phase"], op, c["group_size"], b, DTYPES.get(c["dtype"], c["dtype"]), c["count"]))
    return out


def schedule_collectives(zsim, scenario, steps):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.json")
        r = subprocess.run([zsim, "plan", scenario, "--emit-schedule", path, "--steps", str(steps)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"zsim plan {scenario} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
        with open(path) as f:
            sch = json.load(f)
    size = {g["name"]: g["size"] for g in sch["groups"]}
    c = collections.Counter()
    for op in sch["ops"]:
        if op["kind"] == "collective" and op["phase"] in PHASES:
            c[(op["phase"], op["collective"], size[op["group"]], op["bytes"], op["dtype"])] += 1
    return c


def predicted_calls(zsim, scenario):
    """The second step of a two-step schedule: [(phase, op, group_size, bytes, dtype, count)]."""
    one = schedule_collectives(zsim, scenario, 1)
    two = schedule_collectives(zsim, scenario, 2)
    two.subtract(one)
    return [k + (n,) for k, n in two.items() if n != 0]


def by_key(calls):
    """(phase, op, group_size) -> [calls, bytes]."""
    out = collections.defaultdict(lambda: [0, 0])
    for phase, op, g, b, _dt, n in calls:
        out[(phase, op, g)][0] += n
        out[(phase, op, g)][1] += n * b
    return out


def by_size(calls):
    out = collections.Counter()
    for phase, op, g, b, dt, n in calls:
        out[(phase, op, g, b, dt)] += n
    return out


def order(key):
    return (PHASES.index(key[0]) if key[0] in PHASES else 9,) + tuple(key[1:])


def compare(name, run, zsim, sizes, out):
    """Prints the case's table; returns (rows matched, rows) or None where the run has no calls."""
    meas = measured_calls(run)
    if meas is None:
        out.write(f"== {name}: no collectives recorded ({run.get('status')}, {run.get('failure_kind')})\n")
        return None
    scenario = os.path.join(HERE, "cases", name, "scenario.yaml")
    pred = predicted_calls(zsim, scenario)
    P, M = by_key(pred), by_key(meas)
    out.write(f"== {name} ({run.get('status')})\n")
    out.write(f"  {'phase':8} {'op':14} {'group':>5} {'calls zsim':>10} {'DeepSpeed':>9} "
              f"{'bytes zsim':>14} {'DeepSpeed':>14} {'error':>8}  \n")
    matched = rows = 0
    for k in sorted(set(P) | set(M), key=order):
        pc, pb = P.get(k, [0, 0])
        mc, mb = M.get(k, [0, 0])
        err = (pb - mb) / mb if mb else (0.0 if pb == 0 else float("inf"))
        ok = pc == mc and abs(err) <= 0.005
        matched += ok
        rows += 1
        out.write(f"  {k[0]:8} {k[1]:14} {k[2]:>5} {pc:>10} {mc:>9} {pb:>14} {mb:>14} {100 * err:>+7.2f}%  "
                  f"{'ok' if ok else 'DIFFERS'}\n")
    if sizes:
        ps, ms = by_size(pred), by_size(meas)
        out.write("  per payload (phase op group bytes dtype: zsim DeepSpeed)\n")
        for k in sorted(set(ps) | set(ms), key=order):
            flag = "" if ps.get(k, 0) == ms.get(k, 0) else "   <-"
            out.write(f"    {k[0]:8} {k[1]:14} {k[2]:>3} {k[3]:>12} {k[4]:5}: {ps.get(k, 0):>4} {ms.get(k, 0):>4}"
                      f"{flag}\n")
    return matched, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", nargs="*", help="case names (default: every multi-rank run of the record)")
    ap.add_argument("--runs", default=RUNS, help="folder of run JSONs (default: %(default)s)")
    ap.add_argument("--zsim", default=os.path.join(ROOT, "build", "bin", "zsim"))
    ap.add_argument("--sizes", action="store_true", help="also the calls per payload")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every row matches")
    a = ap.parse_args(argv)
    files = sorted(glob.glob(os.path.join(a.runs, "*.json")))
    if a.cases:
        files = [os.path.join(a.runs, c + ".json") for c in a.cases]
    total = good = 0
    bad_cases = []
    for f in files:
        with open(f) as fh:
            run = json.load(fh)
        name = run["case"]["name"]
        if run["case"].get("world", 1) < 2 and not a.cases:
            continue
        r = compare(name, run, a.zsim, a.sizes, sys.stdout)
        if r is None:
            continue
        good += r[0]
        total += r[1]
        if r[0] != r[1]:
            bad_cases.append(name)
    print(f"\n{good} of {total} rows match; cases that differ: {', '.join(bad_cases) or 'none'}")
    return 1 if a.check and bad_cases else 0


if __name__ == "__main__":
    sys.exit(main())
