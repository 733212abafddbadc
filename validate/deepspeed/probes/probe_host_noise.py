#!/usr/bin/env python3
"""How steady the GPU machine's host is, with nothing else running (issue 39: host-bound DeepSpeed steps vary by up
to 1.9x within a run).

    OUT=/tmp python3 validate/deepspeed/probes/probe_host_noise.py [--seconds 12] [--pin 3]

For --seconds each, unpinned and then pinned to one CPU (--pin), it times again and again
  python   a fixed pure-Python loop (the interpreter's speed: DeepSpeed's hooks and bookkeeping are Python);
  launch   200 tiny CUDA kernels launched back to back and synchronized (the eager dispatch path), when torch and a
           GPU are there;
with the main thread's CPU share and involuntary context switches per sample (host_cpu.py), and writes
OUT/host_noise.json: every sample, and per mode the median, the 10th and 90th percentiles and max / min.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # validate/deepspeed/: zsim_ds
from zsim_ds.harness import host_cpu  # noqa: E402


def make_launch_work():
    try:
        import torch
        if not torch.cuda.is_available():
            return None
    except ImportError:
        return None
    x = torch.zeros(16, device="cuda")

    def launch_work(n=200):
        for _ in range(n):
            x.add_(1.0)
        torch.cuda.synchronize()
    return launch_work


def sample(fn):
    before = host_cpu.main_thread_sample()
    fn()
    after = host_cpu.main_thread_sample()
    fig = host_cpu.step_figures(before, after)
    fig["seconds"] = after["wall"] - before["wall"]
    return fig


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def run_mode(works, seconds):
    samples = {name: [] for name in works}
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for name, fn in works.items():
            samples[name].append(sample(fn))
    summary = {}
    for name, figs in samples.items():
        t = [f["seconds"] for f in figs]
        summary[name] = {"samples": len(t), "median_ms": statistics.median(t) * 1e3,
                         "p10_ms": percentile(t, 0.1) * 1e3, "p90_ms": percentile(t, 0.9) * 1e3,
                         "max_over_min": max(t) / min(t),
                         "involuntary_switches": sum(f["involuntary_switches"] or 0 for f in figs),
                         "cpus": sorted({f["on_cpu"] for f in figs if f["on_cpu"] is not None})}
    return summary, samples


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=12.0)
    ap.add_argument("--pin", type=int, default=3, help="the CPU of the pinned mode")
    args = ap.parse_args()
    works = {"python": host_cpu.reference_work}
    launch = make_launch_work()
    if launch:
        works["launch"] = launch
    for fn in works.values():
        fn()
    out = {"cpus": os.cpu_count(), "modes": {}}
    siblings = host_cpu._read(f"/sys/devices/system/cpu/cpu{args.pin}/topology/thread_siblings_list")
    out["pinned_cpu_siblings"] = siblings.strip() if siblings else None
    for mode in ("unpinned", "pinned"):
        if mode == "pinned":
            os.sched_setaffinity(0, {args.pin})
        summary, samples = run_mode(works, args.seconds)
        out["modes"][mode] = {"summary": summary,
                              "seconds": {k: [round(f["seconds"] * 1e3, 4) for f in v] for k, v in samples.items()}}
        print(mode, json.dumps(summary))
    path = os.path.join(os.environ.get("OUT", "."), "host_noise.json")
    with open(path, "w") as f:
        json.dump(out, f)
    print("wrote", path)


if __name__ == "__main__":
    main()
