"""A session's DeepSpeed runs predicted with a machine's own profile, beside the committed H200 profile (issue 59):

    python3 validate/deepspeed/predict_node.py RESULTS_DIR|RESULT.json [...] --profile my-node.yaml
                                               [--zsim build/bin/zsim] [--baseline-gpu PRESET] [--json OUT.json]

For each ok one-rank harness result of a case in cases/, `zsim validate` twice, each at the run's own host speed (its
reference loops, as zsim validate takes them):
  profile   the case with its cluster block replaced by `cluster: {profile: NAME, nodes: 1, gpus_per_node: W}`
            (config.json and ds_config.json copied beside it), NAME the profile's file name, found by --profile-dir;
  baseline  the committed case scenario (host-h200.yaml's figures, copied into it by make_cases.py) on the run's GPU
            preset (`--set cluster.gpu=PRESET`: by the run's GPU name, or --baseline-gpu).
Prints per case the measured step and both predictions with their errors, then each one's median |error| and worst,
and writes them to --json. Standard library only (zsim does the predicting).
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from .. import ROOT  # validate/deepspeed/
from . import figures as fig


def case_scenario_with_profile(text, profile_name, world):
    """The case's scenario.yaml text with its top-level `cluster:` block replaced by the profile's name and the run's
    shape (nothing else of the cluster: the profile gives it all)."""
    out, skipping = [], False
    for line in text.splitlines():
        if line.startswith("cluster:"):
            out.append(f"cluster: {{profile: {profile_name}, nodes: 1, gpus_per_node: {world}}}")
            skipping = True
            continue
        if skipping and (line.startswith(" ") or not line.strip()):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out) + "\n"


def results_of(paths):
    """(path, result) of every ok one-rank harness result under paths (folders of <case>.json, or files)."""
    out = []
    for p in paths:
        for f in [p] if p.endswith(".json") else sorted(glob.glob(os.path.join(p, "*.json"))):
            try:
                with open(f) as fh:
                    r = json.load(fh)
            except (OSError, ValueError):
                continue
            if r.get("format") == "zsim.deepspeed_run" and r.get("status") == "ok" and \
                    (r.get("case") or {}).get("world") == 1:
                out.append((f, r))
    return out


def zsim_validate(zsim, run, scenario, extra, out_json):
    """zsim validate's step_time block and its warnings (stderr), or (None, stderr) where it failed."""
    cmd = [zsim, "validate", run, "--scenario", scenario, "--json", out_json, *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    with open(out_json) as f:
        return json.load(f)["step_time"], p.stderr.strip()


def summary(errors):
    """(median |error|, the error of largest magnitude) in percent, or (None, None)."""
    if not errors:
        return None, None
    return statistics.median(abs(e) for e in errors) * 100, max(errors, key=abs) * 100


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="folders of harness results (<case>.json), or results")
    ap.add_argument("--profile", required=True, help="the machine's profile (calibrate_node.py --out)")
    ap.add_argument("--zsim", default="build/bin/zsim")
    ap.add_argument("--baseline-gpu", help="the GPU preset of the baseline (default: by each run's GPU name)")
    ap.add_argument("--json", help="write every case's figures and the summaries here")
    args = ap.parse_args(argv)
    name = os.path.splitext(os.path.basename(args.profile))[0]
    rows, warned = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        profiles = os.path.join(tmp, "profiles")
        os.makedirs(profiles)
        shutil.copy(args.profile, os.path.join(profiles, name + ".yaml"))
        for path, r in results_of(args.results):
            case = r["case"]["name"]
            case_dir = os.path.join(ROOT, "cases", case)
            if not os.path.isfile(os.path.join(case_dir, "scenario.yaml")):
                print(f"{case}: no case folder in {os.path.join(ROOT, 'cases')}: left out", file=sys.stderr)
                continue
            d = os.path.join(tmp, case)
            os.makedirs(d)
            for f in ("config.json", "ds_config.json"):
                shutil.copy(os.path.join(case_dir, f), d)
            with open(os.path.join(case_dir, "scenario.yaml")) as f:
                text = case_scenario_with_profile(f.read(), name, 1)
            with open(os.path.join(d, "scenario.yaml"), "w") as f:
                f.write(text)
            mine, err_mine = zsim_validate(args.zsim, path, os.path.join(d, "scenario.yaml"),
                                           ["--profile-dir", profiles], os.path.join(d, "profile.json"))
            preset = args.baseline_gpu or fig.gpu_preset((r.get("versions") or {}).get("gpu"),
                                                         (r.get("versions") or {}).get("gpu_total_memory") or 0)
            base, err_base = zsim_validate(args.zsim, path, os.path.join(case_dir, "scenario.yaml"),
                                           ["--set", f"cluster.gpu={preset}"] if preset else [],
                                           os.path.join(d, "baseline.json"))
            for e in (err_mine, err_base):
                for line in e.splitlines():  # zsim validate's own (the stack); the scenarios' key warnings are known
                    if line.startswith("zsim validate: warning") and line not in warned:
                        warned.add(line)
                        print(line, file=sys.stderr)
            rows.append({"case": case, "run": path, "measured_s": (mine or base or {}).get("measured_s"),
                         "profile": mine, "baseline": base, "baseline_gpu": preset,
                         "failures": [e for p, e in ((mine, err_mine), (base, err_base)) if p is None]})
            for failure in rows[-1]["failures"]:
                print(f"{case}: zsim validate failed: {failure}", file=sys.stderr)
    print(f"{'case':42s} {'measured':>10s}   {name + ' (error)':>24s}   {'H200 profile (error)':>24s}")
    for row in rows:
        def cell(p):
            return f"{p['predicted_s'] * 1e3:9.1f} ms ({p['rel_error'] * 100:+6.1f}%)" if p else "failed"
        m = row["measured_s"]
        print(f"{row['case']:42s} {m * 1e3 if m else float('nan'):7.1f} ms   {cell(row['profile']):>24s}   "
              f"{cell(row['baseline']):>24s}")
    out = {"profile": args.profile, "cases": rows, "summary": {}}
    for key, label in (("profile", name), ("baseline", "H200 profile")):
        errs = [row[key]["rel_error"] for row in rows if row[key] and row[key].get("rel_error") is not None]
        med, worst = summary(errs)
        out["summary"][key] = {"cases": len(errs), "median_abs_percent": med, "worst_percent": worst}
        if errs:
            print(f"{label}: {len(errs)} cases, median |error| {med:.1f}%, worst {worst:+.1f}%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
