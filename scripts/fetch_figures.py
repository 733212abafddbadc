#!/usr/bin/env python3
"""Stage-3 fetch figures of one scenario (issues 10 and 13): forward all-gather calls per micro-step,
peak GPU buffers (walked from the emitted schedule), GPU peak, step time, backward hpz and cross-node
bytes per GPU, device-copy bytes. Usage: scripts/fetch_figures.py SCENARIO.yaml [--set KEY=VALUE]...
(run from the repository root after building build/bin/zsim)."""
import json
import subprocess
import sys
import tempfile

zsim = "build/bin/zsim"
scenario, sets = sys.argv[1], sys.argv[2:]
with tempfile.TemporaryDirectory() as d:
    subprocess.run([zsim, "plan", scenario, "--emit-schedule", f"{d}/s.json", *sets], check=True, capture_output=True)
    subprocess.run([zsim, scenario, "--json", f"{d}/r.json", *sets], check=True, capture_output=True)
    sch = json.load(open(f"{d}/s.json"))
    rep = json.load(open(f"{d}/r.json"))

groups = {g["name"]: g for g in sch["groups"]}
live = peak_buffers = 0
fetch_live = peak_fetch = 0  # the stage-3 fetch's buffers: gathered, prefetch, flat, quant
fwd_ag = bwd_hpz = 0
for op in sch["ops"]:
    if op["kind"] in ("alloc", "free") and op["tier"] == "gpu" and op["category"] == "buffers":
        live += op["bytes"] if op["kind"] == "alloc" else -op["bytes"]
        peak_buffers = max(peak_buffers, live)
        if op.get("detail") in ("gathered", "prefetch", "flat", "quant"):
            fetch_live += op["bytes"] if op["kind"] == "alloc" else -op["bytes"]
            peak_fetch = max(peak_fetch, fetch_live)
    if op["kind"] == "collective" and op["collective"] == "all_gather" and op.get("micro_step", 0) == 0 \
            and op["phase"] == "forward":
        fwd_ag += 1
fwd_ag //= sch["meta"]["steps"]
for c in rep["comm"]["collectives"]:
    if c["phase"] == "backward" and c["group"] == "hpz":
        bwd_hpz += c["bytes_per_gpu"]
GiB = 2**30
print(f"forward all_gather calls per micro-step: {fwd_ag}")
print(f"peak GPU buffers (schedule walk): {peak_buffers / GiB:.3f} GiB")
print(f"peak GPU fetch buffers (gathered + prefetch + flat + quant): {peak_fetch / GiB:.3f} GiB")
print(f"GPU peak: {rep['memory']['gpu']['peak'] / GiB:.3f} GiB")
print(f"step time: {rep['time']['step_s'] * 1e3:.1f} ms")
print(f"backward hpz all_gather bytes per GPU per step: {bwd_hpz / GiB:.3f} GiB")
print(f"cross-node bytes per GPU per step: {rep['comm']['cross_node_bytes_per_gpu'] / GiB:.3f} GiB")
d2d = rep["comm"]["copies_per_gpu"].get("d2d")
print(f"d2d copy bytes per GPU per step: {(d2d['total'] if d2d else 0) / GiB:.3f} GiB")
