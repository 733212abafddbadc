#!/usr/bin/env python3
"""The verdict of `zsim advise`'s GPU check (issue 41) from the harness's results of the advise cases.

    python3 compare_advise.py RESULTS_DIR [--json FILE]

RESULTS_DIR holds the harness's `<case>.json` (device_run.sh packs them as deepspeed_results/cases/). The cases are
those of lists/advise.txt (advise_cases.py); each case.json's `advise` block says its setting and role (default,
fit, advised). Per setting it prints, for each role: zsim's prediction (fits or OOM, tokens/s), what DeepSpeed did
(ok, oom or another failure; measured tokens/s = micro_batch x grad_accum x seq_len x world / the median timed step;
peak reserved), then whether the advised ds_config ran without running out of memory and whether its measured
tokens/s is at least the baseline's: the faster of the default and its fitting variant among those that ran. Where
the advice is the fitting variant's configuration (same_configuration: advise writes DeepSpeed's defaults out, so the
files differ), it passes as that configuration, both runs' figures printed.
A result whose recorded ds_config is not the case's (the case rewritten since it ran) is not counted.
Exit 0: every setting passes; 1: one fails; 2: a result is missing or of another version of its case. Standard library only.
"""
import argparse
import json
import os
import sys

from .. import ROOT as HERE  # validate/deepspeed/
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


# What DeepSpeed runs differently between two cases: the case's own fields (the model's checkpointing among them) and
# its ds_config, where both name a key (advise writes DeepSpeed's defaults out; a user's file leaves them out).
CASE_FIELDS = ("model", "seq_len", "world", "micro_batch", "grad_accum", "attention", "checkpointing",
               "gpu_memory_cap_bytes")


def agree(a, b):
    """Whether two ds_config values agree on every key both name (nested blocks alike)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return all(agree(a[k], b[k]) for k in a.keys() & b.keys())
    return a == b


def same_configuration(a, b):
    """Whether cases `a` and `b` ({"case": case.json, "ds_config": its ds_config.json}) run DeepSpeed the same way:
    their files may differ in keys left at DeepSpeed's defaults and in order. A zero_optimization block one of them
    lacks is stage 0 (DeepSpeed's default)."""
    if any(a["case"].get(k) != b["case"].get(k) for k in CASE_FIELDS):
        return False
    za = a["ds_config"].get("zero_optimization", {})
    zb = b["ds_config"].get("zero_optimization", {})
    return za.get("stage", 0) == zb.get("stage", 0) and agree(a["ds_config"], b["ds_config"])


def verdict(rows):
    """rows: role -> {"advise": case.json's advise block, "measured": measured() or None, "case": case.json,
    "ds_config": its ds_config}. Returns (passed, text)."""
    adv = rows.get("advised")
    if not adv or not adv["measured"]:
        return False, "no result of the advised case"
    m = adv["measured"]
    if m["status"] != "ok":
        return False, f"the advised ds_config failed ({m['failure_kind']})"
    fit = rows.get("fit")
    if fit and all(k in x for x in (adv, fit) for k in ("case", "ds_config")) and same_configuration(adv, fit):
        # The advice is the fitting variant itself: its throughput is the variant's; two runs differ by run-to-run noise.
        f = fit["measured"]
        also = (f"; the variant's own run {f['tokens_per_s']:.0f} ({100 * (m['tokens_per_s'] / f['tokens_per_s'] - 1):+.1f}%, "
                f"run to run)" if f and f.get("tokens_per_s") else "")
        return True, (f"advised runs (no OOM) at {m['tokens_per_s']:.0f} tokens/s; the advice is the fitting variant's "
                      f"configuration (advise's ds_config, written out in full){also}")
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
    stale = []
    for n in names:
        with open(os.path.join(HERE, "cases", n, "case.json")) as f:
            case = json.load(f)
        a = case.get("advise")
        if not a:
            raise ValueError(f"cases/{n}/case.json: no 'advise' block (write the cases with advise_cases.py)")
        with open(os.path.join(HERE, "cases", n, case.get("ds_config", "ds_config.json"))) as f:
            ds = json.load(f)
        p = os.path.join(results_dir, n + ".json")
        res = None
        if os.path.isfile(p):
            with open(p) as f:
                result = json.load(f)
            ran = (result.get("case") or {}).get("ds_config")
            if ran is not None and ran != ds:  # the case was rewritten (advise_cases.py) after this result was measured
                stale.append(n)
            else:
                res = measured(result)
        else:
            missing.append(n)
        settings.setdefault(a["setting"], {})[a["role"]] = {"name": n, "advise": a, "measured": res,
                                                           "cap": case.get("gpu_memory_cap_bytes"), "case": case,
                                                           "ds_config": ds}
    return settings, missing, stale


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
    settings, missing, stale = load(args.results_dir, names)
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
    if stale:
        print("results of another version of the case (its ds_config differs from the one the result ran; "
              "not counted): " + " ".join(stale))
    if missing or stale:
        if missing:
            print("missing results: " + " ".join(missing))
        return 2
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
