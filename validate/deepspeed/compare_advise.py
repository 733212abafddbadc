#!/usr/bin/env python3
"""The verdict of `zsim advise`'s GPU check (issue 41) from the harness's results of the advise cases.

    python3 compare_advise.py RESULTS_DIR [--json FILE]

RESULTS_DIR holds the harness's `<case>.json` (device_run.sh packs them as deepspeed_results/cases/). The cases are
those of lists/advise.txt (advise_cases.py); each case.json's `advise` block says its setting and role (default,
fit, advised). Per setting it prints, for each role: zsim's prediction (fits or OOM, tokens/s), what DeepSpeed did
(ok, oom or another failure; measured tokens/s = micro_batch x grad_accum x seq_len x world / the median timed step;
peak reserved), then whether the advised ds_config ran without running out of memory and whether its measured
tokens/s is at least the baseline's: the faster of the default and its fitting variant among those that ran.
Exit 0: every setting passes; 1: one fails; 2: a result is missing. Standard library only.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LIST = os.path.join(HERE, "lists", "advise.txt")
ROLES = ("default", "fit", "advised")
GiB = 1 << 30


def measured(result):
    """{status, failure_kind, tokens_per_s, median_step_s, peak_reserved_bytes} of one harness result."""
    c = result.get("case") or {}
    steps = [((r.get("timing") or {}).get("median_step_seconds")) for r in result.get("ranks", [])]
    steps = [s for s in steps if s]
    step = max(steps) if steps else None  # the slowest rank's median (one rank here)
    tokens = c.get("micro_batch", 0) * c.get("grad_accum", 0) * c.get("seq_len", 0) * c.get("world", 1)
    peaks = [((r.get("memory") or {}).get("peak_reserved")) for r in result.get("ranks", [])]
    peaks = [p for p in peaks if p is not None]
    ok = result.get("status") == "ok"
    return {"status": result.get("status"), "failure_kind": result.get("failure_kind"),
            "tokens_per_s": tokens / step if ok and step else None, "median_step_s": step,
            "peak_reserved_bytes": max(peaks) if peaks else None}


def verdict(rows):
    """rows: role -> {"advise": case.json's advise block, "measured": measured() or None}. Returns (passed, text)."""
    adv = rows.get("advised")
    if not adv or not adv["measured"]:
        return False, "no result of the advised case"
    m = adv["measured"]
    if m["status"] != "ok":
        return False, f"the advised ds_config failed ({m['failure_kind']})"
    base = [(role, rows[role]["measured"]["tokens_per_s"]) for role in ("fit", "default")
            if role in rows and rows[role]["measured"] and rows[role]["measured"]["tokens_per_s"]]
    if not base:
        return True, f"advised runs at {m['tokens_per_s']:.0f} tokens/s; no baseline ran (default and fit failed)"
    role, best = max(base, key=lambda x: x[1])
    ok = m["tokens_per_s"] >= best
    return ok, (f"advised runs (no OOM); {m['tokens_per_s']:.0f} tokens/s {'>=' if ok else '<'} {role}'s "
                f"{best:.0f} ({100 * (m['tokens_per_s'] / best - 1):+.1f}%)")


def load(results_dir, names):
    settings = {}
    missing = []
    for n in names:
        with open(os.path.join(HERE, "cases", n, "case.json")) as f:
            case = json.load(f)
        a = case.get("advise")
        if not a:
            raise ValueError(f"cases/{n}/case.json: no 'advise' block (write the cases with advise_cases.py)")
        p = os.path.join(results_dir, n + ".json")
        res = None
        if os.path.isfile(p):
            with open(p) as f:
                res = measured(json.load(f))
        else:
            missing.append(n)
        settings.setdefault(a["setting"], {})[a["role"]] = {"name": n, "advise": a, "measured": res,
                                                           "cap": case.get("gpu_memory_cap_bytes")}
    return settings, missing


def fmt_row(role, r):
    a, m = r["advise"], r["measured"]
    z = (f"zsim {'fits' if a['zsim_fits'] else 'OOM'} {a['zsim_gpu_peak_bytes'] / GiB:5.1f} GiB "
         f"{a['zsim_tokens_per_s']:8.0f} tok/s")
    if m is None:
        d = "no result"
    elif m["status"] == "ok":
        d = f"ok  {m['tokens_per_s']:8.0f} tok/s, peak reserved {m['peak_reserved_bytes'] / GiB:.1f} GiB"
    else:
        d = f"{m['failure_kind'] or m['status']}"
    return f"  {role:8s} {a['configuration'][:70]:70s} | {z} | DeepSpeed {d}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results_dir", help="the folder of the harness's <case>.json results")
    ap.add_argument("--json", help="write the table and verdicts as JSON here")
    args = ap.parse_args(argv)
    with open(LIST) as f:
        names = [ln.split()[0] for ln in f if ln.strip()]
    settings, missing = load(args.results_dir, names)
    all_ok = True
    out = {}
    for s, rows in settings.items():
        cap = next(iter(rows.values()))["cap"]
        print(f"{s} (GPU capped to {cap / GiB:.0f} GiB)")
        for role in ROLES:
            if role in rows:
                print(fmt_row(role, rows[role]))
        ok, text = verdict(rows)
        all_ok &= ok
        print(f"  {'PASS' if ok else 'FAIL'}: {text}")
        out[s] = {"passed": ok, "verdict": text, "roles": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    if missing:
        print("missing results: " + " ".join(missing))
        return 2
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
