#!/usr/bin/env python3
"""Whether the host runs slower while the GPU is busy (issue 39: DeepSpeed's host-bound stage-3 steps take longer,
on the same host work, when the GPU's work beside it grows; docs/deepspeed-time.md "The fit").

    OUT=/tmp python3 validate/deepspeed/probes/probe_host_beside_gpu.py [--repeat 7]
    python3 validate/deepspeed/probes/probe_host_beside_gpu.py --summarize OUT/host_beside_gpu.json

Each workload below is timed on the host (perf_counter around the loop; no synchronisation inside) in two states:
  idle   the GPU has nothing queued (synchronized just before);
  busy   a chain of bf16 8192^3 GEMMs was queued just before (--busy-ms of GPU work), so the workload's own kernels
         queue behind it and the GPU computes while the host works.
Workloads:
  python    a fixed pure-Python loop (no CUDA call): the CPU's own speed;
  dispatch  --launches eager ops (x.add_(1.0) on 16 elements): torch's dispatch and cudaLaunchKernel;
  autograd  forward and backward of a small MLP (8 Linear layers of 64, batch 8): the autograd engine's thread
            issuing a backward, as DeepSpeed's backward does.
Then the launch queue: behind --busy-ms x 3 of GEMMs, --queue-launches tiny launches back to back, the host's time
at every 64th; where a launch starts to wait for the GPU is the queue's depth (the host can run that far ahead).
Writes OUT/host_beside_gpu.json: every sample, per workload and state the median, and busy / idle. Torch and a GPU on
the device; --summarize needs neither.
"""
import argparse
import json
import os
import statistics
import sys
import time


def python_loop(n=20000):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def make_workloads(torch, launches):
    x = torch.zeros(16, device="cuda")
    mlp = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)]).cuda()
    inp = torch.randn(8, 64, device="cuda")

    def dispatch():
        for _ in range(launches):
            x.add_(1.0)

    def autograd():
        mlp(inp).sum().backward()

    return {"python": python_loop, "dispatch": dispatch, "autograd": autograd}


def make_busy(torch, busy_ms):
    """Queues about busy_ms of GEMMs (timed once alone) and returns a function that queues them again."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    out = torch.empty_like(a)
    torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    gemm_ms = (time.perf_counter() - t0) * 100.0
    count = max(1, int(busy_ms / gemm_ms))

    def busy(scale=1):
        for _ in range(count * scale):
            torch.matmul(a, b, out=out)
    return busy, gemm_ms, count


def time_host(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def queue_depth(torch, busy, launches):
    """The host's time at every 64th of `launches` tiny launches queued behind 3x the busy chain."""
    x = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    busy(3)
    marks = []
    t0 = time.perf_counter()
    for i in range(launches):
        x.add_(1.0)
        if i % 64 == 63:
            marks.append([i + 1, (time.perf_counter() - t0) * 1e3])
    torch.cuda.synchronize()
    return marks


def summarize_rows(samples):
    out = {}
    for name, states in samples.items():
        med = {state: statistics.median(v) for state, v in states.items()}
        out[name] = {"idle_ms": med["idle"] * 1e3, "busy_ms": med["busy"] * 1e3, "busy_over_idle": med["busy"] / med["idle"]}
    return out


def summarize(path):
    with open(path) as f:
        r = json.load(f)
    print(f"# {os.path.basename(path)}: {r['repeat']} samples per state; busy = {r['busy_gemms']} GEMMs of "
          f"{r['gemm_ms']:.2f} ms queued first")
    for name, row in r["medians"].items():
        print(f"  {name:9s} idle {row['idle_ms']:8.3f} ms  busy {row['busy_ms']:8.3f} ms  busy/idle "
              f"{row['busy_over_idle']:.3f}")
    depth = r.get("queue_depth_launches")
    print(f"  launch queue: the host first waited after about {depth} launches" if depth else
          "  launch queue: no launch waited")
    return 0


def first_wait(marks, per_launch_ms):
    """The launch count where the host's time per 64 launches first exceeds 20x the idle dispatch's."""
    prev_n, prev_t = 0, 0.0
    for n, t in marks:
        if (t - prev_t) > 20 * per_launch_ms * (n - prev_n):
            return prev_n
        prev_n, prev_t = n, t
    return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--launches", type=int, default=200)
    ap.add_argument("--busy-ms", type=float, default=100.0)
    ap.add_argument("--queue-launches", type=int, default=4096)
    ap.add_argument("--summarize", metavar="JSON")
    args = ap.parse_args(argv)
    if args.summarize:
        return summarize(args.summarize)
    import torch
    work = make_workloads(torch, args.launches)
    busy, gemm_ms, count = make_busy(torch, args.busy_ms)
    for fn in work.values():  # warming: kernels loaded, autograd's thread started
        fn()
    torch.cuda.synchronize()
    samples = {name: {"idle": [], "busy": []} for name in work}
    for _ in range(args.repeat):
        for name, fn in work.items():
            torch.cuda.synchronize()
            samples[name]["idle"].append(time_host(fn))
            torch.cuda.synchronize()
            busy()
            samples[name]["busy"].append(time_host(fn))
            torch.cuda.synchronize()
    medians = summarize_rows(samples)
    marks = queue_depth(torch, busy, args.queue_launches)
    per_launch_ms = medians["dispatch"]["idle_ms"] / args.launches
    result = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "repeat": args.repeat,
              "launches": args.launches, "busy_ms": args.busy_ms, "gemm_ms": gemm_ms, "busy_gemms": count,
              "samples_s": samples, "medians": medians, "queue_marks_ms": marks,
              "queue_depth_launches": first_wait(marks, per_launch_ms)}
    out = os.path.join(os.environ.get("OUT", "/tmp"), "host_beside_gpu.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print("wrote", out)
    return summarize(out)


if __name__ == "__main__":
    sys.exit(main())
