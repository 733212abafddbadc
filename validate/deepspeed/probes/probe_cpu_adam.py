#!/usr/bin/env python3
"""Times DeepSpeed's own CPU Adam (DeepSpeedCPUAdam, the optimizer of offload_optimizer: cpu) on the host (issue 39).

    OUT=/tmp python3 validate/deepspeed/probes/probe_cpu_adam.py [--params 134217728] [--threads 1,2,4,8,16] [--repeat 5]
    python3 validate/deepspeed/probes/probe_cpu_adam.py --summarize OUT/cpu_adam.json      # the profile's lines

The DeepSpeed cases with the optimizer on the CPU price its step at the preset's estimate
(`efficiency.cpu_adam_params_per_s_per_core` 1e8), not at a measurement of the optimizer DeepSpeed runs. This probe
builds DeepSpeedCPUAdam (JIT, CPUAdamBuilder: TORCH_EXTENSIONS_DIR as device_run.sh sets it) over one flat fp32
parameter of --params elements with a gradient (a rank's partition; 128M as `zrun calibrate` times its own CPU Adam,
beyond the caches), and at each thread count (torch.set_num_threads: the OpenMP team the extension's loops use) runs
one warming step, then times --repeat steps (wall clock; their median). It writes OUT/cpu_adam.json, the rate per
thread count and the default team's size (what a DeepSpeed rank runs with). --summarize prints the figures as a
profile's `efficiency.cpu_adam_measured.ranks_1.threads_<T>` (params/s; zsim interpolates at the scenario's cores,
docs/hardware-profiles.md): a line for validate/deepspeed/host-h200.yaml's efficiency block, which make_cases.py
copies into every case's scenario. Torch and DeepSpeed on the device; --summarize needs neither.
"""
import argparse
import json
import os
import statistics
import sys
import time


def probe(params, threads, repeat):
    """One thread count's row: the median step's seconds and the rate, params/s."""
    import torch
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    torch.set_num_threads(threads)
    p = torch.nn.Parameter(torch.zeros(params, dtype=torch.float32))
    p.grad = torch.full_like(p, 1e-3)
    opt = DeepSpeedCPUAdam([p], lr=1e-4, adamw_mode=True)
    opt.step()  # warming: the optimizer's state is allocated and touched
    seconds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        opt.step()
        seconds.append(time.perf_counter() - t0)
    median_s = statistics.median(seconds)
    return {"threads": threads, "params": params, "step_seconds": seconds, "median_step_seconds": median_s,
            "params_per_s": params / median_s}


def profile_figures(result):
    """{threads_<T>: params/s} of the rows that ran, for efficiency.cpu_adam_measured.ranks_1."""
    return {f"threads_{r['threads']}": r["params_per_s"] for r in sorted(result["rows"], key=lambda r: r["threads"])
            if "params_per_s" in r}


def summarize(path):
    with open(path) as f:
        result = json.load(f)
    figures = profile_figures(result)
    print(f"# DeepSpeedCPUAdam over {result['params']} parameters, {result.get('cpus')} CPUs, the default team "
          f"{result.get('default_threads')} threads: validate/deepspeed/probes/probe_cpu_adam.py ({os.path.basename(path)})")
    print("    cpu_adam_measured: {ranks_1: {" + ", ".join(f"{k}: {v:.4g}" for k, v in figures.items()) + "}}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", type=int, default=128 * 1024 * 1024)
    ap.add_argument("--threads", help="comma-separated thread counts (default: 1, 2, 4, ... up to the CPUs)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--summarize", metavar="JSON", help="print a result's figures as a profile's lines")
    args = ap.parse_args(argv)
    if args.summarize:
        return summarize(args.summarize)
    import torch
    cpus = os.cpu_count() or 1
    counts = [int(t) for t in args.threads.split(",")] if args.threads else \
        [t for t in (1, 2, 4, 8, 16, 32, 64, 128) if t <= cpus]
    default_threads = torch.get_num_threads()
    rows = []
    for t in counts:
        try:
            rows.append(probe(args.params, t, args.repeat))
        except Exception as e:  # a failed count is recorded, the others still run
            rows.append({"threads": t, "error": f"{type(e).__name__}: {e}"})
        r = rows[-1]
        print(f"threads {t:3d}: " + (f"{r['median_step_seconds'] * 1e3:8.1f} ms a step, {r['params_per_s']:.3g} params/s"
                                     if "error" not in r else r["error"]), flush=True)
    result = {"torch": torch.__version__, "cpus": cpus, "default_threads": default_threads, "params": args.params,
              "repeat": args.repeat, "rows": rows}
    out = os.path.join(os.environ.get("OUT", "/tmp"), "cpu_adam.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
