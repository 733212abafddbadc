#!/usr/bin/env python3
"""Summarises the harness's profiles (--profile-steps): per phase of the profiled step, the host's wall time, the GPU's
busy time and its kernels by class, the kernels launched, the top-level torch ops, and DeepSpeed's annotated methods.

    python3 profile_summary.py TRACE.json.gz [...] [--json OUT.json]

A trace is torch's Chrome trace (rank<R>.trace.json.gz beside a rank's JSON). Phases are the harness's
`zsim.<phase>` ranges; a kernel belongs to the phase whose host range it started in (the GPU runs behind the host, so
a host-bound phase's kernels all start inside it). Classes by kernel name: gemm (cuBLAS / cuBLASLt / CUTLASS: gemm,
nvjet, cutlass, xmma, sm90), attn (flash, fmha, attention, cudnn), adam, memcpy (copies and memsets), other (the
elementwise, norm and loss kernels). Host waits: the blocking CUDA runtime calls in the phase (stream, event and
device synchronisations, synchronous copies, cudaFree), by the innermost torch op and DeepSpeed method around each
(on the calling thread), so a phase's time spent waiting for the GPU reads apart from its Python; a profiled host
runs behind the GPU, so it waits less than a free-running one (the harness's timing.host_per_step times those).
The profiler slows the host (about 1.7-2x here): time the phases with --phase-steps, read the structure here.
Standard library only.
"""
import argparse
import collections
import gzip
import json
import sys


def union_us(intervals):
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_s is None or s > cur_e:
            if cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_s is not None else 0.0)


def kernel_class(event):
    if event.get("cat") != "kernel":
        return "memcpy"
    n = event["name"].lower()
    if any(k in n for k in ("gemm", "nvjet", "cutlass", "xmma", "sm90")):
        return "gemm"
    if any(k in n for k in ("flash", "fmha", "attention", "cudnn")):
        return "attn"
    if "adam" in n:
        return "adam"
    return "other"


# CUDA runtime calls that block the host until the GPU has run what they wait for (a stream's, an event's or the
# device's work; a synchronous copy; cudaFree synchronizes the device).
BLOCKING_RUNTIME_CALLS = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize", "cudaMemcpy",
                          "cudaFree")


def is_blocking(event):
    return event["name"] in BLOCKING_RUNTIME_CALLS


def innermost(candidates, event):
    """The latest-starting candidate on the event's thread that encloses it (None when none does)."""
    best = None
    for c in candidates:
        if c.get("tid") == event.get("tid") and c["ts"] <= event["ts"] and \
                c["ts"] + c["dur"] >= event["ts"] + event["dur"] and (best is None or c["ts"] >= best["ts"]):
            best = c
    return best


def host_waits(waits, ops, ds):
    """The host's blocking calls: their time, count, and time by the torch op and DeepSpeed method that made them."""
    by_op, by_method = collections.Counter(), collections.Counter()
    for w in waits:
        op = innermost(ops, w)
        method = innermost(ds, w)
        by_op[op["name"] if op else w["name"]] += w["dur"]
        by_method[method["name"] if method else "(no DeepSpeed method)"] += w["dur"]
    return {"ms": round(sum(w["dur"] for w in waits) / 1e3, 3), "calls": len(waits),
            "ms_by_op": {n: round(v / 1e3, 3) for n, v in by_op.most_common(8)},
            "ms_by_deepspeed_method": {n: round(v / 1e3, 3) for n, v in by_method.most_common(8)}}


def runtime_calls(calls, top=10):
    """The CUDA runtime calls by name: how many, and their host time (cudaLaunchKernel waits where the launch queue
    is full; cudaMalloc and cudaFree are the caching allocator growing or shrinking)."""
    count, dur = collections.Counter(), collections.Counter()
    for c in calls:
        count[c["name"]] += 1
        dur[c["name"]] += c["dur"]
    return {n: {"calls": count[n], "ms": round(dur[n] / 1e3, 3)} for n, _ in dur.most_common(top)}


def thread_busy_ms(ops):
    """Each thread's time inside torch ops (the union of its ops' intervals): the main thread's forward and step,
    autograd's thread's backward."""
    by_tid = collections.defaultdict(list)
    for x in ops:
        by_tid[x.get("tid")].append((x["ts"], x["ts"] + x["dur"]))
    return {str(t): round(union_us(v) / 1e3, 3) for t, v in by_tid.items()}


def summarize(events):
    X = [e for e in events if e.get("ph") == "X"]
    phases = [e for e in X if e.get("cat") == "user_annotation" and e["name"].startswith("zsim.")]
    kernels = [e for e in X if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    runtime = [e for e in X if e.get("cat") == "cuda_runtime"]
    ops = sorted((e for e in X if e.get("cat") == "cpu_op"), key=lambda e: (e["ts"], -e["dur"]))
    ds = [e for e in X if e.get("cat") == "user_annotation" and e["name"].startswith("ds.")]
    out = {}
    for p in phases:
        s, e = p["ts"], p["ts"] + p["dur"]
        inside = lambda x: s <= x["ts"] < e  # noqa: E731
        k = [x for x in kernels if inside(x)]
        top, end = 0, -1.0
        for x in ops:
            if inside(x) and x["ts"] >= end:
                top += 1
                end = x["ts"] + x["dur"]
        by_class = collections.Counter()
        for x in k:
            by_class[kernel_class(x)] += x["dur"]
        annotated = collections.Counter()
        for x in ds:
            if inside(x):
                annotated[x["name"]] += x["dur"]
        out.setdefault(p["name"][len("zsim."):], []).append({
            "host_ms": p["dur"] / 1e3,
            "gpu_busy_ms": union_us([(x["ts"], x["ts"] + x["dur"]) for x in k]) / 1e3,
            "kernels": len(k),
            "launches": sum(1 for x in runtime if inside(x) and any(w in x["name"] for w in ("Launch", "Memcpy", "Memset"))),
            "top_level_ops": top,
            "gpu_ms_by_class": {c: round(v / 1e3, 3) for c, v in sorted(by_class.items())},
            "deepspeed_ms": {n: round(v / 1e3, 3) for n, v in annotated.most_common(12)},
            "host_waits": host_waits([x for x in runtime if inside(x) and is_blocking(x)], ops, ds),
            "runtime_calls": runtime_calls([x for x in runtime if inside(x)]),
            "thread_busy_ms": thread_busy_ms([x for x in ops if inside(x)]),
        })
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--json", help="write {trace: summary} here")
    args = ap.parse_args(argv)
    result = {}
    for path in args.traces:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt") as f:
            result[path] = summarize(json.load(f)["traceEvents"])
        for phase, steps in result[path].items():
            for x in steps:
                print(f"{path} {phase:9s} host {x['host_ms']:8.2f} ms  GPU busy {x['gpu_busy_ms']:7.2f} ms  "
                      f"kernels {x['kernels']:5d}  ops {x['top_level_ops']:5d}  {x['gpu_ms_by_class']}  "
                      f"host waits {x['host_waits']['ms']:.2f} ms in {x['host_waits']['calls']} calls "
                      f"{x['host_waits']['ms_by_deepspeed_method']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
