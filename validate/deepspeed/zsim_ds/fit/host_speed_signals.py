#!/usr/bin/env python3
"""Which per-step host figure follows a DeepSpeed case's step time (issue 39: the host's speed moves within a run).

    python3 host_speed_signals.py RESULT.json [...]      # harness results (a run folder's <case>.json)

For each result, over rank 0's timed steps: the step's median and range, and Pearson's correlation of the step's
wall time with each figure the harness records per step (timing.host_per_step[]): the main thread's reference loop
(`reference_work_seconds`), the same loop on autograd's device thread (`autograd_reference_work_seconds`), the main
thread's CPU seconds (`cpu_seconds`) and autograd's threads' (`autograd_cpu_seconds`). A figure the result lacks
prints as "-". The last line gives each figure's median correlation over the results.
"""
import argparse
import json
import statistics

from ..harness import host_cpu

SIGNALS = (("main loop", "reference_work_seconds"), ("autograd loop", "autograd_reference_work_seconds"),
           ("main cpu", "cpu_seconds"), ("autograd cpu", "autograd_cpu_seconds"))


def correlation(xs, ys):
    """Pearson's r of two equal-length lists; None where either is constant or shorter than 3."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:  # a constant list
        return None


def timed_steps(timing):
    """[(step seconds, host figures)] of the timed steps."""
    return list(zip(timing.get("step_seconds") or [], host_cpu.timed_host_per_step(timing)))


def signals_of(timing):
    """{signal label: r or None} and the steps' seconds, for one rank's timing."""
    steps = timed_steps(timing)
    out = {}
    for label, key in SIGNALS:
        pairs = [(s, h[key]) for s, h in steps if h and h.get(key) is not None]
        out[label] = correlation([s for s, _ in pairs], [v for _, v in pairs]) if len(pairs) == len(steps) else None
    return out, [s for s, _ in steps]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    args = ap.parse_args(argv)
    by_signal = {label: [] for label, _ in SIGNALS}
    print(f"{'case':44} {'step ms: median (min-max)':>26}  " + "  ".join(f"{label:>13}" for label, _ in SIGNALS))
    for path in args.results:
        with open(path) as f:
            result = json.load(f)
        if result.get("status") != "ok":
            continue
        rs, steps = signals_of(result["ranks"][0]["timing"])
        for label, r in rs.items():
            if r is not None:
                by_signal[label].append(r)
        span = f"{statistics.median(steps) * 1e3:.1f} ({min(steps) * 1e3:.0f}-{max(steps) * 1e3:.0f})"
        cells = "  ".join(f"{'-' if r is None else f'{r:+.2f}':>13}" for r in rs.values())
        print(f"{result['case']['name']:44} {span:>26}  {cells}")
    cells = "  ".join(f"{'-' if not v else f'{statistics.median(v):+.2f}':>13}" for v in by_signal.values())
    print(f"{'median r':44} {'':>26}  {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
