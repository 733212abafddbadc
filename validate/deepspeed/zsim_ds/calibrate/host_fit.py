"""The host figures of one calibration session: the committed profile's figures (the prior and the fallback for
figures its runs do not determine) and the fit of the session's phase samples (fit_host.py's least squares, optionally
pulled towards the prior)."""
import glob
import json
import os
import statistics

from .. import ROOT  # validate/deepspeed/
from ..fit import fit_host as fh

COMMITTED_PROFILE = os.path.join(ROOT, "host-h200.yaml")


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def committed_host(path=COMMITTED_PROFILE):
    """host-h200.yaml's deepspeed_host figures {name: value} (stdlib: its lines, `name: value  # ...`)."""
    out, inside = {}, False
    with open(path) as f:
        for line in f:
            if line.strip() == "deepspeed_host:":
                inside = True
                continue
            if inside:
                if not line.startswith("      "):
                    break
                name, value = line.split("#", 1)[0].strip().split(":", 1)
                out[name.strip()] = float(value)
    return out


def solve_with_prior(samples, speeds, prior, weight):
    """fit_host.py's least squares (each sample's measurement over its host-speed scale against its row's figures),
    figures that come out negative dropped (0) and the rest fitted again, with `weight` pseudo-samples per figure of
    `prior` (name -> microseconds): a row of the figure's typical count in the samples (the median of its non-zero
    counts; 1 where no sample counts it) whose measurement is that count x the prior. weight 0: the plain fit (a
    figure no sample counts, 0). A figure's prior pulls it only as far as its own samples do not: with few samples a
    session's noise cannot swing it (or drop it) as a plain fit of one session does."""
    rows = [list(s["row"]) for s in samples]
    ys = [s["measured_us"] / k for s, k in zip(samples, speeds)]
    active = fh.sampled(samples)
    if weight > 0:
        for j, name in enumerate(fh.FIGURES):
            if name not in prior:
                continue
            counts = sorted(abs(r[j]) for r in rows[:len(samples)] if r[j])
            c = counts[len(counts) // 2] if counts else 1.0
            row = [0.0] * len(fh.FIGURES)
            row[j] = c * weight ** 0.5
            rows.append(row)
            ys.append(c * weight ** 0.5 * prior[name])
            active[j] = True
    while True:
        x = fh.solve(rows, ys, active)
        neg = [i for i, v in enumerate(x) if active[i] and v < 0]
        if not neg:
            return x
        for i in neg:
            active[i] = False


def fit_host_figures(runs_dir, cases_dir, exponent, committed, prior_weight=0.0):
    """The host's figures from the phase-timed runs in runs_dir: {"figures": [(name, value, note)], "samples",
    "cases", "rms_percent", "worst", "reference_loop_us", "exponent", "autograd_loop_us", "taken_from_committed",
    "not_determined"}; None where no run gives a sample. The fit is fit_host.py's (each run's phases scaled to its
    free-running step, eager figures included), at each run's host speed with the reference the median of the runs'
    main-thread loops and `exponent` (a number, or "fit" for the grid's best), and with `prior_weight` pseudo-samples
    a figure of the committed profile's figures scaled to this reference loop (solve_with_prior). A figure no sample
    counts, or one the samples do not determine, is committed[name] x (reference / committed's reference) ^ exponent."""
    samples = fh.load_samples([runs_dir], cases_dir)
    if not samples:
        return None
    runs_loops = {s["run"]: s["main_loop_s"] for s in samples if s["main_loop_s"]}
    reference_s = statistics.median(sorted(runs_loops.values())) if runs_loops else None
    for s in samples:
        s["loop_s"] = s["loop_s"] or reference_s
    committed_ref = committed.get("reference_loop_us")
    not_determined = []

    def fit_at(x_exponent):
        scale = (reference_s * 1e6 / committed_ref) ** x_exponent if reference_s and committed_ref else 1.0
        prior = {k: v * scale for k, v in committed.items() if k in fh.FIGURES}
        speeds = fh.speeds_at(samples, reference_s, x_exponent) if reference_s else [1.0] * len(samples)
        while True:
            try:
                x = solve_with_prior(samples, speeds, prior, prior_weight)
                break
            except ValueError as e:  # "figure NAME is not determined by these runs"
                name = next((n for n in fh.FIGURES if f"figure {n} " in str(e)), None)
                if name is None:
                    raise
                not_determined.append(name)
                for s in samples:
                    s["row"][fh.FIGURES.index(name)] = 0
        rms = fh.rms_percent(fh.residuals(samples, x, speeds))
        return x, speeds, scale, rms

    if not reference_s:  # no run timed the loop (a harness before it): the figures as measured, at no stated speed
        used_exponent = None
        x, speeds, scale, _ = fit_at(0.0)
    elif exponent == "fit":
        tried = {round(e, 2): fit_at(e)[3] for e in fh.EXPONENT_GRID}
        used_exponent = min(tried, key=tried.get)
        x, speeds, scale, _ = fit_at(used_exponent)
    else:
        used_exponent = float(exponent)
        x, speeds, scale, _ = fit_at(used_exponent)
    for s, k in zip(samples, speeds):
        s["fitted_us"] = sum(a * b for a, b in zip(s["row"], x)) * k
        s["residual"] = (s["fitted_us"] - s["measured_us"]) / s["measured_us"]
    worst = max(samples, key=lambda s: abs(s["residual"]))
    sampled = fh.sampled(samples)
    figures, taken = [], []
    for col, name in enumerate(fh.FIGURES):
        if sampled[col]:
            note = fh.figure_note(name, col, samples, x[col])
            if prior_weight > 0 and name in committed:
                note += f"; pulled toward host-h200.yaml's {committed[name] * scale:.1f} (x {prior_weight:g} samples)"
            figures.append((name, x[col], note))
        elif name in committed:
            why = "not determined by the runs that finished" if name in not_determined else "no run sampled it"
            figures.append((name, committed[name] * scale,
                            f"{why}: host-h200.yaml's {committed[name]:.1f} x {scale:.3f} (its reference loop to "
                            f"this one's, ^ the exponent)"))
            taken.append(name)
    autograd = []  # autograd's thread's loop, each run that timed it (the backward's samples are taken at it)
    for path in sorted(glob.glob(os.path.join(runs_dir, "*.json"))):
        ranks = (read_json(path) or {}).get("ranks") or []
        loop = fh.host_cpu.run_autograd_loop_seconds(ranks[0].get("timing") or {}) if ranks else None
        if loop:
            autograd.append(loop)
    return {"figures": figures, "samples": len(samples), "cases": sorted({s["case"] for s in samples}),
            "rms_percent": fh.rms_percent([s["residual"] for s in samples]),
            "worst": {"case": worst["case"], "phase": worst["phase"], "percent": worst["residual"] * 100},
            "reference_loop_us": reference_s * 1e6 if reference_s else None, "exponent": used_exponent,
            "exponent_fitted": exponent == "fit", "timed_runs": len(runs_loops), "prior_weight": prior_weight,
            "autograd_loop_us": statistics.median(autograd) * 1e6 if autograd else None,
            "taken_from_committed": taken, "not_determined": not_determined,
            "sample_rows": [{k: v for k, v in s.items() if k != "row"} for s in samples]}
