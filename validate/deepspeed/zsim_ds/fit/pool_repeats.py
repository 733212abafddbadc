#!/usr/bin/env python3
"""Pools the repeated runs of a record folder's DeepSpeed cases into one result per case.

    python3 pool_repeats.py RECORD_DIR runs-1 runs-2 [...] [--out runs]

RECORD_DIR (e.g. validate/results/h200-deepspeed-steptime/) holds the same cases run several times, one run folder
per repeat (runs-1/, runs-2/, ...), each with the harness's `<case>.json`. The pooled folder RECORD_DIR/OUT
(default runs/) gets one `<case>.json` per case of the FIRST run folder:

  * everything (memory, collectives, ...) is the first run's result, copied;
  * the rule: a case's step time is the median of its timed steps over all its ok runs. For each rank index r,
    timing.step_seconds becomes rank r's step_seconds of every run folder whose result of the case has status
    "ok", concatenated in the order the folders are given; timing.median_step_seconds is statistics.median of that
    list; timing.pooled_from names each pooled run with its own median and its number of timed steps;
  * the host's speed: timing.reference_loop_seconds is the median over the pooled runs of each run's own (the
    median of its timed steps' host_per_step[].reference_work_seconds, host_cpu.py's reference loop), over the runs
    that timed it; absent where none did. timing.autograd_reference_loop_seconds, the same on autograd's thread
    (host_per_step[].autograd_reference_work_seconds), is the median over the same runs of each one's own, a run
    that did not time it taken at its main thread's; absent where no run timed it. zsim validate predicts the case at
    them (docs/deepspeed-time.md); each pooled_from entry carries its run's;
  * the top-level "pooled" says the folders pooled ("runs"), the rule, and the runs left out ("left_out": status
    not ok, or "missing" where a folder lacks the case). A case whose first run is not ok is copied unchanged
    but for "pooled".

A case found in a later folder but not in the first is reported on stderr and skipped. `<case>.json` files
directly in OUT that are not written this time are removed. One line per case is printed: each run's median and
the pooled median in ms (the slowest rank's). Exit 0; 2 when a run folder is missing, none is given, or OUT is
one of the run folders. Standard library only.
"""
import argparse
import copy
import json
import os
import statistics
import sys

from ..harness import host_cpu  # the harness's host figures (standard library only)

RULE = "a case's step time is the median of its timed steps over all its ok runs"


class Refusal(Exception):
    """A command line that pool_repeats will not act on (exit code 2)."""


def main(argv=None):
    args = parse_args(argv)
    try:
        check_folders(args.record_dir, args.runs, args.out)
    except Refusal as e:
        print(f"pool_repeats.py: error: {e}", file=sys.stderr)
        return 2
    pool_record(args.record_dir, args.runs, args.out)
    return 0


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("record_dir", help="the record folder holding the run folders")
    ap.add_argument("runs", nargs="*", help="run folders inside RECORD_DIR; the first one gives the cases")
    ap.add_argument("--out", default="runs", help="pooled folder inside RECORD_DIR (default: runs)")
    return ap.parse_args(argv)


def check_folders(record_dir, runs, out):
    """Raises Refusal when no run folder is given, one does not exist, or out is one of them."""
    if not runs:
        raise Refusal(f"no run folder given for {record_dir}")
    out_path = os.path.realpath(os.path.join(record_dir, out))
    for run in runs:
        path = os.path.join(record_dir, run)
        if not os.path.isdir(path):
            raise Refusal(f"run folder {path} does not exist")
        if os.path.realpath(path) == out_path:
            raise Refusal(f"--out {path} is one of the run folders")


def pool_record(record_dir, runs, out):
    """Writes the pooled `<case>.json` of every case of runs[0] into record_dir/out; removes stale ones."""
    cases = case_names(os.path.join(record_dir, runs[0]))
    report_extra_cases(record_dir, runs, cases)
    out_dir = os.path.join(record_dir, out)
    os.makedirs(out_dir, exist_ok=True)
    for case in cases:
        results = load_case(record_dir, runs, case)
        pooled = pool_case(case, results)
        write_json_atomic(os.path.join(out_dir, f"{case}.json"), pooled)
        print(case_line(case, results, pooled))
    remove_stale(out_dir, cases)


def case_names(folder):
    """The case names (file names less .json) of the `*.json` files directly in folder, sorted."""
    return sorted(n[:-len(".json")] for n in os.listdir(folder)
                  if n.endswith(".json") and os.path.isfile(os.path.join(folder, n)))


def report_extra_cases(record_dir, runs, cases):
    """Names on stderr the cases of a later run folder that the first one lacks (they are skipped)."""
    known = set(cases)
    for run in runs[1:]:
        for case in case_names(os.path.join(record_dir, run)):
            if case not in known:
                print(f"pool_repeats.py: {run}/{case}.json: not in {runs[0]}/, skipped", file=sys.stderr)


def load_case(record_dir, runs, case):
    """[(run folder, its result of case or None where the folder lacks it)] in the order of runs."""
    results = []
    for run in runs:
        path = os.path.join(record_dir, run, f"{case}.json")
        results.append((run, read_json(path) if os.path.isfile(path) else None))
    return results


def read_json(path):
    with open(path) as f:
        return json.load(f)


def pool_case(case, results):
    """The first result, its ranks' timings pooled over the ok results (see the module docstring)."""
    first = results[0][1]
    pooled = copy.deepcopy(first)
    left_out = [{"run": run_label(run, case), "status": res.get("status") if res else "missing"}
                for run, res in results if not is_ok(res)]
    if not is_ok(first):
        pooled["pooled"] = {"runs": [], "rule": RULE, "left_out": left_out,
                            "note": "the first run is not ok: its result is copied unchanged"}
        return pooled
    ok = [(run, res) for run, res in results if is_ok(res)]
    for r, rank in enumerate(pooled.get("ranks") or []):
        pool_rank(rank, r, ok, case)
    pooled["pooled"] = {"runs": [run for run, _ in ok], "rule": RULE, "left_out": left_out}
    return pooled


def is_ok(result):
    return result is not None and result.get("status") == "ok"


def run_label(run, case):
    return f"{run}/{case}.json"


def pool_rank(rank, r, ok, case):
    """Replaces rank (index r) timing's steps and median by those pooled over the ok results; adds pooled_from."""
    timing = rank.get("timing")
    if not timing:
        return
    parts = [(run, res, rank_steps(res, r)) for run, res in ok]
    parts = [(run, res, steps) for run, res, steps in parts if steps]
    if not parts:
        return
    steps = [s for _, _, run_steps in parts for s in run_steps]
    timing["step_seconds"] = steps
    timing["median_step_seconds"] = statistics.median(steps)
    timing["pooled_from"] = [{"run": run_label(run, case), "median_step_seconds": own_median(res, r),
                              "timed_steps": len(run_steps), "reference_loop_seconds": own_loop(res, r),
                              "autograd_reference_loop_seconds": own_autograd_loop(res, r)}
                             for run, res, run_steps in parts]
    loops = [p["reference_loop_seconds"] for p in timing["pooled_from"] if p["reference_loop_seconds"]]
    timing.pop("reference_loop_seconds", None)
    if loops:
        timing["reference_loop_seconds"] = statistics.median(loops)
    # autograd's thread: each run's own, or where it did not time it its main thread's (as zsim takes a run without
    # one), so that the median is over the same runs as the main thread's; absent where no run timed it
    autograd = [p["autograd_reference_loop_seconds"] or p["reference_loop_seconds"] for p in timing["pooled_from"]
                if p["reference_loop_seconds"]]
    timing.pop("autograd_reference_loop_seconds", None)
    if any(p["autograd_reference_loop_seconds"] for p in timing["pooled_from"]):
        timing["autograd_reference_loop_seconds"] = statistics.median(autograd)


def own_loop(result, r):
    """Rank r's host speed in result (host_cpu.run_loop_seconds; None: not timed)."""
    return host_cpu.run_loop_seconds(rank_timing(result, r))


def own_autograd_loop(result, r):
    """Rank r's host speed on autograd's thread in result (host_cpu.run_autograd_loop_seconds; None: not timed)."""
    return host_cpu.run_autograd_loop_seconds(rank_timing(result, r))


def rank_timing(result, r):
    """Rank r's timing dict of result, or {} when it has none."""
    ranks = result.get("ranks") or []
    return (ranks[r].get("timing") or {}) if r < len(ranks) else {}


def rank_steps(result, r):
    return list(rank_timing(result, r).get("step_seconds") or [])


def own_median(result, r):
    """Rank r's median step of result: its recorded one, else the median of its steps (None without steps)."""
    timing = rank_timing(result, r)
    if timing.get("median_step_seconds") is not None:
        return timing["median_step_seconds"]
    steps = rank_steps(result, r)
    return statistics.median(steps) if steps else None


def slowest_median(result):
    """The largest median_step_seconds over result's ranks, or None."""
    medians = [m for m in (own_median(result, r) for r in range(len(result.get("ranks") or []))) if m is not None]
    return max(medians) if medians else None


def case_line(case, results, pooled):
    """`case  run-1 41.81  run-2 status  -> pooled 41.90 ms` (the slowest rank's medians)."""
    runs = "  ".join(f"{run} {ms_text(res)}" for run, res in results)
    if not is_ok(results[0][1]):
        return f"{case}  {runs}  -> first run not ok, copied unchanged"
    return f"{case}  {runs}  -> pooled {ms_text(pooled)} ms"


def ms_text(result):
    if result is None:
        return "missing"
    if not is_ok(result):
        return str(result.get("status"))
    median = slowest_median(result)
    return "-" if median is None else f"{1000 * median:.2f}"


def write_json_atomic(path, obj):
    """json.dump(indent=1) plus a newline, through a temporary file and os.replace: never half a file."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def remove_stale(out_dir, cases):
    """Removes the `*.json` files directly in out_dir that are not `<case>.json` of one of cases."""
    keep = {f"{case}.json" for case in cases}
    for name in os.listdir(out_dir):
        path = os.path.join(out_dir, name)
        if name.endswith(".json") and name not in keep and os.path.isfile(path):
            os.remove(path)


if __name__ == "__main__":
    sys.exit(main())
