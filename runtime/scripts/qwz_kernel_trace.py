"""qwZ's kernels inside a zrun step against the same kernels alone, both timed by CUPTI (libzrun_kernel_trace.so):
the GPU's own start and end of each kernel, with no timing event around it. Used by bench_zeropp.sh.

usage: qwz_kernel_trace.py RAW.tsv SIZES STEP.tsv STEP.json STEPS_RUN STEPS_SKIPPED
  RAW.tsv   kernel_bench --qwz SIZES... traced: per size, in this order, one quantize (the int8 input of the
            dequantizes), then 23 launches each (3 untimed + 20) of quantize hot, dequantize hot, quantize cold,
            dequantize cold, dequantize produced (kernels/bench/kernel_bench.cpp)
  SIZES     the sizes given to kernel_bench, comma-separated, in its order
  STEP.tsv  zrun traced without --json (no timing events); STEPS_RUN steps, of which the first STEPS_SKIPPED are
            left out (warm-up)
  STEP.json zrun --json of the same scenario: its `measured.quantization` ops in program order give each kernel of a
            step its size (checked against the grid kernel_bench launched for that size)
Each in-step kernel is held to the raw kernel of its size: quantize cold (it reads the rank's partition from HBM),
dequantize produced (its int8 input just written by the all-gather, its output cold). A kernel ran "alone" when no
other kernel, copy or memset of the trace overlapped it.
"""
import bisect
import json
import statistics
import sys
from collections import defaultdict

REPS, UNTIMED = 23, 3


def read(path):
    rows = []
    with open(path) as f:
        next(f)
        for line in f:
            kind, stream, start, end, grid, block, nbytes, name = line.rstrip("\n").split("\t")
            rows.append({"kind": kind, "stream": int(stream), "start": int(start), "end": int(end),
                         "grid": int(grid), "name": name})
    rows.sort(key=lambda r: r["start"])
    return rows


def qwz_kind(row):
    if row["kind"] != "kernel":
        return None
    if "qwz_dequant" in row["name"]:
        return "dequantize"
    if "qwz_quant" in row["name"]:
        return "quantize"
    return None


def seconds(row):
    return (row["end"] - row["start"]) * 1e-9


def raw_figures(rows, sizes):
    """(kind, elements) -> {"grid": g, "hot": s, "cold": s[, "produced": s]} from kernel_bench's launch order."""
    ks = [r for r in rows if qwz_kind(r)]
    per_size = 1 + 5 * REPS
    if len(ks) != per_size * len(sizes):
        sys.exit(f"qwz_kernel_trace: {len(ks)} qwZ kernels in the raw trace, not {per_size} for each of {len(sizes)} sizes")
    out = {}
    for i, n in enumerate(sizes):
        at = i * per_size + 1
        blocks = [ks[at + b * REPS: at + (b + 1) * REPS] for b in range(5)]
        med = lambda b: statistics.median(seconds(r) for r in blocks[b][UNTIMED:])
        out[("quantize", n)] = {"grid": blocks[0][0]["grid"], "hot": med(0), "cold": med(2)}
        out[("dequantize", n)] = {"grid": blocks[1][0]["grid"], "hot": med(1), "cold": med(3), "produced": med(4)}
    return out


def main():
    raw_path, sizes_arg, step_path, json_path, steps_run, skipped = sys.argv[1:7]
    raw = raw_figures(read(raw_path), [int(s) for s in sizes_arg.split(",")])
    steps_run, skipped = int(steps_run), int(skipped)
    ops = [o for o in json.load(open(json_path))["measured"]["quantization"] if o["dtype"] == "int8"]
    rows = read(step_path)
    ks = [r for r in rows if qwz_kind(r)]
    if len(ks) != len(ops) * steps_run:
        sys.exit(f"qwz_kernel_trace: {len(ks)} qwZ kernels in the step trace, not {len(ops)} ops x {steps_run} steps")
    if len({r["stream"] for r in ks}) != 1:
        sys.exit("qwz_kernel_trace: the qwZ kernels ran on several streams; their time order need not be program order")
    # Whether anything else ran on the GPU during a kernel: the other records that start before it ends and end
    # after it starts (the trace sorted by start; no record is longer than `longest`).
    others = [r for r in rows if not qwz_kind(r)]
    starts = [o["start"] for o in others]
    longest = max((o["end"] - o["start"] for o in others), default=0)
    def overlapped(k):
        lo = bisect.bisect_left(starts, k["start"] - longest)
        hi = bisect.bisect_left(starts, k["end"])
        return any(o["end"] > k["start"] for o in others[lo:hi])
    by = defaultdict(lambda: {"s": [], "alone": [], "n": 0})
    for pos, op in enumerate(ops):
        key = (op["compute"], op["elements"])
        if key not in raw:
            sys.exit(f"qwz_kernel_trace: no raw figure for the step's {key[0]} of {key[1]} elements")
        by[key]["n"] += 1
        for step in range(skipped, steps_run):
            k = ks[step * len(ops) + pos]
            if qwz_kind(k) != key[0] or k["grid"] != raw[key]["grid"]:
                sys.exit(f"qwz_kernel_trace: step {step}'s qwZ kernel {pos} ({qwz_kind(k)}, grid {k['grid']}) is not "
                         f"op {op['name']} ({key[0]} of {key[1]} elements, grid {raw[key]['grid']})")
            by[key]["s"].append(seconds(k))
            if not overlapped(k):
                by[key]["alone"].append(seconds(k))
    print(f"{'kernel':<11} {'elements':>9} {'ops':>4} {'in step us':>10} {'raw us':>8} {'ratio':>6}   "
          f"{'alone us':>9} {'ratio':>6} {'kernels alone':>13}")
    total_step = total_raw = 0.0
    for (kind, n), v in sorted(by.items()):
        r = raw[(kind, n)]["cold" if kind == "quantize" else "produced"]
        step = statistics.median(v["s"])
        total_step += statistics.mean(v["s"]) * v["n"]
        total_raw += r * v["n"]
        alone = f"{statistics.median(v['alone'])*1e6:>9.2f} {r/statistics.median(v['alone']):>6.2f}" if v["alone"] \
            else f"{'-':>9} {'-':>6}"
        print(f"{kind:<11} {n:>9} {v['n']:>4} {step*1e6:>10.2f} {r*1e6:>8.2f} {r/step:>6.2f}   {alone} "
              f"{len(v['alone']):>6}/{len(v['s'])}")
    print(f"all {len(ops)} qwZ kernels of a step (mean of {steps_run - skipped} steps): {total_step*1e3:.3f} ms in the "
          f"step, {total_raw*1e3:.3f} ms raw: ratio {total_raw/total_step:.2f}")


if __name__ == "__main__":
    main()
