#!/usr/bin/env python3
"""Fits zsim's DeepSpeed host model (efficiency.deepspeed_host) from the harness's phase-timed micro-runs.

    python3 fit_host.py RESULTS_DIR|RESULT.json [...] [--profile OUT.yaml] [--report OUT.json] [--raw-phases]

Each RESULTS_DIR holds harness results (<case>.json; RESULT.json names one) of lists `fit`, `fit2` and `fit3`
(cases.tsv: models of their own, never a validation case), run with --phase-steps (forward, backward and the
optimizer step timed apart, a synchronisation after each). Those runs are host-bound (their kernels are short: the profiles show the GPU busy a
third of the time or less), so each phase's median wall time is the host's: a linear sum of what the host runs, with the counts
zsim's sim/engine/deepspeed_host.cpp uses (its header says where each comes from; M = the model's own modules,
6 Llama / 7 GPT-2):

  forward   = forward_fixed + L x {llama,gpt2}_forward_layer + [ckpt] L x checkpoint_forward_layer
              + [eager] L x eager_forward_layer
              + [stage 3] (13 L + M) x stage3_forward_module                        (no checkpointing)
              + [stage 3, ckpt] 13 L x stage3_checkpoint_forward_module + M x stage3_forward_module
  backward  = backward_fixed + L x {llama,gpt2}_backward_layer + [ckpt] L x recompute_layer
              + [stage 3] (13 L + M) x stage3_backward_module + [stage 3, ckpt] 13 L x stage3_recompute_module
              + [stage 2] P x stage12_reduce_param + [stage 1] P x stage1_reduce_param
                                                             (the fit's runs have no gradient accumulation)
              + [eager] L x eager_backward_layer + [eager, ckpt] L x eager_forward_layer   (the recompute's)
  step      = step_fixed + P x (stage 3 ? stage3_step_param : step_param)

fitted together by least squares (every phase of every run one sample; a run repeated in several results
directories counts each time), figures that come out negative dropped and the rest fitted again. A figure no run
samples (its column all zero: e.g. no run at stage 3 with checkpointing) is not fitted and is left out of the
profile, so zsim prices it at its default (0; the two stage-3 checkpointing figures: stage3_forward_module_us).

Runs at stages 1-2 with the optimizer on the CPU (and the parameters on the GPU) give their backward phase only, as
  backward  = the above + P x stage12_offload_param + N x 4 bytes / the case's PCIe rate
with N the model's elements (the run's `model.parameters`): at the boundary copy_grads_in_partition handles the
tensors one by one, each waiting for the GPU (its overflow check reads a sum back), so each tensor's fp32 copy down
(the case's scenario.yaml `links.pcie_GBps`) runs beside no host work; that time is taken off the sample, which fits
the host's part. Their forward and step (CPU Adam, the copy up) and every other offload run are left out: other
figures price them.

The two eager figures are fitted only with --eager-figures: list `fit`'s eager runs are nearly all at stages 1-2, so
there they trade off against stage12_reduce_param (fitted with them on three sessions: 0.21 / 0.26 ms a layer, the
reduction 47 -> 19 us a tensor); list `fit2` crosses eager and SDPA with the stages to separate them (with its runs:
0.18 / 0.21 ms a layer, the reduction 44 us).

Scaled to free-running steps: a phase-timed step's three phases sum to ~5-15% more than a free-running step of the
same run, because the synchronisation after each phase waits for the GPU's tail (the kernels the host queued last,
which in a free-running step overlap the next phase's Python) and adds the synchronisation's own cost. zsim is
validated against free-running steps, and a host-bound free-running step is the host's time, so by default each
run's phase medians are multiplied by (median of its free-running timed steps, timing.step_seconds) / (the sum of
its three phase medians), so that they sum to its free-running step; each run's ratio is printed, and a run without
free-running steps is left out (said so). --raw-phases fits the phases as timed (the fit before the scaling).

The host's speed (--loop-speed-exponent fit|X): the host's CPU runs the same Python up to 2x slower from one lease
to the next, and within one (docs/deepspeed-time.md). The harness times a fixed pure-Python loop after every step
(host_cpu.py, timing.host_per_step[].reference_work_seconds); a run's loop is its median over the timed steps. With
the flag each run's samples are divided by (its loop / the reference loop) ^ X before the fit, so that the figures
hold on a host whose loop takes the reference (the median of the fit runs' main-thread loops), and the residuals
are taken at each run's own speed. Two threads, two speeds: the backward's Python runs on autograd's device thread,
whose vCPU keeps its own speed (probe autograd-1), so a backward sample is taken at the loop the harness times on
that thread (host_per_step[].autograd_reference_work_seconds; a run before it, at its main thread's), the forward's
and the step's at the main thread's; one reference and one X for both. `fit` tries X from 0 to 1.5 by 0.05 and
keeps the one of least residual rms. A run without a timed loop (the first sessions' harness did not time it) is
taken at the reference speed (said so). The profile gets reference_loop_us and loop_speed_exponent; zsim scales the
forward's and the step's figures by (loop_us / reference_loop_us) ^ X where a scenario gives the host's loop_us, and
the backward's by (autograd_loop_us / reference_loop_us) ^ X (not given: loop_us; zsim validate: the run's own).

Writes the profile (cluster.efficiency.deepspeed_host.*, each figure with its samples and the fit's residuals) and a
report of every sample's fit. Standard library only.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

from ..harness import host_cpu  # the harness's host figures (standard library only)

from .. import ROOT as HERE  # validate/deepspeed/
HOOKS_PER_LAYER = 13
FIGURES = ["forward_fixed_us", "llama_forward_layer_us", "gpt2_forward_layer_us", "checkpoint_forward_layer_us",
           "stage3_forward_module_us", "stage3_checkpoint_forward_module_us", "backward_fixed_us",
           "llama_backward_layer_us", "gpt2_backward_layer_us", "recompute_layer_us", "stage3_backward_module_us",
           "stage3_recompute_module_us", "step_fixed_us", "step_param_us", "stage3_step_param_us",
           "stage12_reduce_param_us", "stage1_reduce_param_us", "stage12_offload_param_us", "eager_forward_layer_us",
           "eager_backward_layer_us"]
EAGER_FIGURES = ("eager_forward_layer_us", "eager_backward_layer_us")
# What zsim prices a figure at when the profile leaves it out (sim/scenario/scenario.hpp, DeepSpeedHost).
DEFAULT_WHEN_LEFT_OUT = {"stage3_checkpoint_forward_module_us": "stage3_forward_module_us",
                         "stage3_recompute_module_us": "stage3_forward_module_us",
                         "stage1_reduce_param_us": "stage12_reduce_param_us"}


def structure(case_dir):
    """What the host model counts, from the case's own files (as zsim reads them)."""
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    with open(os.path.join(case_dir, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(case_dir, "ds_config.json")) as f:
        ds = json.load(f)
    gpt2 = cfg.get("model_type") == "gpt2"
    layers = cfg["n_layer"] if gpt2 else cfg["num_hidden_layers"]
    tied = cfg.get("tie_word_embeddings", gpt2)
    zero = ds.get("zero_optimization", {})
    with open(os.path.join(case_dir, "scenario.yaml")) as f:
        pcie = re.search(r"pcie_GBps:\s*([0-9.]+)", f.read())
    return {
        "layers": layers,
        "gpt2": gpt2,
        "model_modules": 7 if gpt2 else 6,
        # transformers' parameter tensors: GPT-2 12 a block (+ wte, wpe, ln_f's two); Llama 9 a layer (+ embedding,
        # norm, head unless tied)
        "params": 12 * layers + 4 if gpt2 else 9 * layers + 2 + (0 if tied else 1),
        "stage": int(zero.get("stage", 0)),
        "ckpt": case["checkpointing"] == "full",
        "eager": case.get("attention") == "eager",
        "offload": "offload_optimizer" in zero or "offload_param" in zero,
        "offload_optimizer_only": "offload_optimizer" in zero and "offload_param" not in zero,
        "pcie_GBps": float(pcie.group(1)) if pcie else None,
    }


def offload_backward_only(st):
    """A run whose backward alone is fitted: stages 1-2 with the optimizer on the CPU (module docstring)."""
    return st["offload_optimizer_only"] and st["stage"] in (1, 2) and st["pcie_GBps"]


def copy_down_us(st, elements):
    """The fp32 gradients of `elements` parameters copied down at the case's PCIe rate, microseconds."""
    return 4 * elements / (st["pcie_GBps"] * 1e9) * 1e6


def features(st, phase):
    """The sample's row over FIGURES for one phase."""
    z3, ck, L = st["stage"] == 3, st["ckpt"], st["layers"]
    layer_modules, model_modules = HOOKS_PER_LAYER * L, st["model_modules"]
    row = dict.fromkeys(FIGURES, 0.0)
    if phase == "forward":
        row["forward_fixed_us"] = 1
        row["gpt2_forward_layer_us" if st["gpt2"] else "llama_forward_layer_us"] = L
        row["checkpoint_forward_layer_us"] = L if ck else 0
        row["eager_forward_layer_us"] = L if st["eager"] else 0
        if z3 and ck:  # the checkpointed layers' hooks apart (measured cheaper); the model's own modules as ever
            row["stage3_checkpoint_forward_module_us"] = layer_modules
            row["stage3_forward_module_us"] = model_modules
        elif z3:
            row["stage3_forward_module_us"] = layer_modules + model_modules
    elif phase == "backward":
        row["backward_fixed_us"] = 1
        row["gpt2_backward_layer_us" if st["gpt2"] else "llama_backward_layer_us"] = L
        row["recompute_layer_us"] = L if ck else 0
        row["stage3_backward_module_us"] = layer_modules + model_modules if z3 else 0
        row["stage3_recompute_module_us"] = layer_modules if (z3 and ck) else 0
        # the same loop in stage 2's gradient hooks (autograd's thread) and in stage 1's reduce_gradients after
        # backward (the main thread): fitted apart
        row["stage12_reduce_param_us"] = st["params"] if st["stage"] == 2 else 0
        row["stage1_reduce_param_us"] = st["params"] if st["stage"] == 1 else 0
        row["stage12_offload_param_us"] = st["params"] if offload_backward_only(st) else 0
        row["eager_backward_layer_us"] = L if st["eager"] else 0
        row["eager_forward_layer_us"] = L if (st["eager"] and ck) else 0  # the recompute runs the forward again
    else:
        row["step_fixed_us"] = 1
        row["stage3_step_param_us" if z3 else "step_param_us"] = st["params"]
    return [row[k] for k in FIGURES]


def solve(rows, ys, active):
    """Least squares over the active columns (normal equations, partial pivoting); the others 0."""
    idx = [i for i, a in enumerate(active) if a]
    n = len(idx)
    A = [[sum(r[i] * r[j] for r in rows) for j in idx] for i in idx]
    b = [sum(r[i] * y for r, y in zip(rows, ys)) for i in idx]
    for i in range(n):
        p = max(range(i, n), key=lambda k: abs(A[k][i]))
        A[i], A[p], b[i], b[p] = A[p], A[i], b[p], b[i]
        if abs(A[i][i]) < 1e-12:
            raise ValueError(f"figure {FIGURES[idx[i]]} is not determined by these runs")
        for k in range(i + 1, n):
            f = A[k][i] / A[i][i]
            for j in range(i, n):
                A[k][j] -= f * A[i][j]
            b[k] -= f * b[i]
    x = [0.0] * n
    for i in reversed(range(n)):
        x[i] = (b[i] - sum(A[i][j] * x[j] for j in range(i + 1, n))) / A[i][i]
    out = [0.0] * len(active)
    for k, i in enumerate(idx):
        out[i] = x[k]
    return out


def sampled(samples):
    """By figure: whether any sample's row counts it (a figure no sample counts is not fitted: 0, left out)."""
    return [any(s["row"][i] for s in samples) for i in range(len(FIGURES))]


def fit(samples, speeds=None):
    """Non-negative figures: fit, drop the negative ones, fit again. A figure no sample counts stays 0. `speeds`
    (one per sample): each sample's host-speed scale, its measurement divided by it (the figures at the reference)."""
    rows = [s["row"] for s in samples]
    ys = [s["measured_us"] / (speeds[i] if speeds else 1.0) for i, s in enumerate(samples)]
    active = sampled(samples)
    while True:
        x = solve(rows, ys, active)
        neg = [i for i, v in enumerate(x) if active[i] and v < 0]
        if not neg:
            return x
        for i in neg:
            active[i] = False


PHASES = ("forward", "backward", "step")
EXPONENT_GRID = [i * 0.05 for i in range(31)]  # 0 .. 1.5


def speeds_at(samples, reference_loop_s, exponent):
    """Each sample's host-speed scale: (its run's loop / the reference) ^ exponent."""
    return [(s["loop_s"] / reference_loop_s) ** exponent for s in samples]


def residuals(samples, x, speeds):
    """(fitted - measured) / measured of each sample, the fitted figures at its run's speed."""
    return [(sum(a * b for a, b in zip(s["row"], x)) * k - s["measured_us"]) / s["measured_us"]
            for s, k in zip(samples, speeds)]


def rms_percent(res):
    return (sum(r * r for r in res) / len(res)) ** 0.5 * 100


def fit_loop_speed(samples, reference_loop_s, exponent):
    """(figures, exponent, rms by exponent tried): the exponent given, or ('fit') the grid's of least rms."""
    tried = {}
    for e in (EXPONENT_GRID if exponent == "fit" else [float(exponent)]):
        speeds = speeds_at(samples, reference_loop_s, e)
        x = fit(samples, speeds)
        tried[round(e, 2)] = (rms_percent(residuals(samples, x, speeds)), x)
    best = min(tried, key=lambda e: tried[e][0])
    return tried[best][1], best, {e: r for e, (r, _) in tried.items()}


def free_running_ratio(timing):
    """The run's median free-running step over the sum of its three phase medians (None: not both measured)."""
    phases = timing.get("median_phase_seconds") or {}
    steps = timing.get("step_seconds") or []
    phase_sum = sum(phases.get(ph) or 0 for ph in PHASES)
    if not steps or not all(phases.get(ph) for ph in PHASES):
        return None
    return statistics.median(steps) / phase_sum


def phase_loop_seconds(phase, timing, main_loop_s):
    """The loop of the thread that runs a phase's Python (None: not timed): the backward's on autograd's device
    thread (host_cpu.run_autograd_loop_seconds; a run that did not time it, its main thread's, as zsim takes it),
    the forward's and the step's on the main thread."""
    if phase == "backward":
        return host_cpu.run_autograd_loop_seconds(timing) or main_loop_s
    return main_loop_s


def load_samples(dirs, cases_dir, raw_phases=False, runs=None):
    """Every phase of every usable run, a sample. Unless raw_phases, each run's phases are scaled to its free-running
    step (free_running_ratio) and a run without one is left out. `runs`, a list, gets each run's
    {"run", "case", "ratio"} (ratio None: left out for want of free-running steps)."""
    samples = []
    for d in dirs:
        for path in ([d] if d.endswith(".json") else sorted(glob.glob(os.path.join(d, "*.json")))):
            with open(path) as f:
                r = json.load(f)
            name = (r.get("case") or {}).get("name") or os.path.basename(path)[:-5]
            ranks = r.get("ranks") or []
            timing = (ranks[0].get("timing") or {}) if ranks else {}
            phases = timing.get("median_phase_seconds")
            case_dir = os.path.join(cases_dir, name)
            if not phases or not os.path.isdir(case_dir):
                continue
            st = structure(case_dir)
            elements = (ranks[0].get("model") or {}).get("parameters") if ranks else None
            if st["offload"] and not (offload_backward_only(st) and elements):
                continue
            scale = 1.0 if raw_phases else free_running_ratio(timing)
            if runs is not None and not raw_phases:
                runs.append({"run": os.path.relpath(path), "case": name, "ratio": scale})
            if scale is None:
                continue
            for ph in PHASES:
                if not phases.get(ph) or (st["offload"] and ph != "backward"):
                    continue
                gpu_us = copy_down_us(st, elements) if st["offload"] else 0.0
                main_loop_s = host_cpu.run_loop_seconds(timing)
                samples.append({"run": os.path.relpath(path), "case": name, "phase": ph, "phase_scale": scale,
                                "main_loop_s": main_loop_s, "loop_s": phase_loop_seconds(ph, timing, main_loop_s),
                                "measured_us": phases[ph] * scale * 1e6 - gpu_us, "row": features(st, ph)})
    return samples


PROFILE_HEAD = """# zsim hardware profile: one NVIDIA H200 running DeepSpeed 0.14.5 + torch 2.11 + transformers 5.17 (bf16), the
# host's figures of a DeepSpeed step (efficiency.deepspeed_host) fitted by validate/deepspeed/fit_host.py from the
# phase-timed micro-runs of lists `fit`, `fit2` and `fit3` (never a validation case): {runs}.
# {scaling}
# Command: python3 validate/deepspeed/fit_host.py {dirs} --profile validate/deepspeed/host-h200.yaml{flags}
# make_cases.py writes these figures into every case's scenario (cluster.efficiency.deepspeed_host). docs/deepspeed-time.md.
# Fit over {n} phase samples: residual rms {rms:.1f}%, worst {worst:+.1f}% ({worst_at}).
description: "NVIDIA H200 under DeepSpeed 0.14.5 + torch 2.11 + transformers 5.17: the host's figures of a DeepSpeed step, fitted from micro-runs"
cluster:
  efficiency:
    deepspeed_host:
"""

# The profile's figures this script does not fit (the memory outside the allocator, torch's GPU figures: each line
# with its own measurement in its comment) are kept as they stand when the host's figures are fitted again: the
# lines after the deepspeed_host block of the profile being rewritten, or, for a new file, of the committed one.
COMMITTED_PROFILE = os.path.join(HERE, "host-h200.yaml")


def kept_tail(path):
    """The lines after the deepspeed_host block's figures of the profile at path (else of COMMITTED_PROFILE)."""
    with open(path if os.path.isfile(path) else COMMITTED_PROFILE) as f:
        lines = f.readlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "deepspeed_host:") + 1
    while start < len(lines) and lines[start].startswith("      "):
        start += 1
    return "".join(lines[start:])


def print_ratios(runs):
    """Each run's free-running step over its phases' sum, the factor its phases were scaled by."""
    print("free-running step / sum of the phase medians, per run (the phases' scale; --raw-phases: 1):")
    for r in runs:
        said = f"{r['ratio']:.3f}" if r["ratio"] is not None else "no free-running steps: left out"
        print(f"  {r['run']:70s} {said}")


def figure_note(name, col, samples, value):
    """The profile's comment on one figure: its samples and their residual rms (or why it is not there)."""
    used = [s for s in samples if s["row"][col]]
    if not used:
        return f"no sample: left out (zsim: {DEFAULT_WHEN_LEFT_OUT.get(name, '0')})"
    rms_percent = (sum(s["residual"] ** 2 for s in used) / len(used)) ** 0.5 * 100
    note = f"{len(used)} samples; their residual rms {rms_percent:.1f}%"
    return note + ("; fitted negative, dropped (0)" if value == 0 else "")


def print_figures(x, samples):
    """Each figure fitted with its samples' count, or why it is not."""
    for col, (name, v) in enumerate(zip(FIGURES, x)):
        used = sum(1 for s in samples if s["row"][col])
        if used:
            print(f"{name:36s} {v:10.1f} us   ({used} samples)")
        else:
            print(f"{name:36s} {'-':>10s}      ({figure_note(name, col, samples, v)})")


def profile_text(x, samples, args, fit_summary, tail, speed=None):
    """The hardware profile: the fitted figures with their notes (a figure no sample counts is left out: zsim's
    default prices it), the host speed they hold at (speed: loop_speed's), then `tail`, the figures fitted elsewhere
    (kept_tail)."""
    scaling = ("Phases as timed (--raw-phases)." if args.raw_phases else
               "Each run's phases scaled to its free-running step (median step_seconds / the phase medians' sum).")
    text = PROFILE_HEAD.format(runs=", ".join(sorted({s["case"] for s in samples})),
                               dirs=" ".join(os.path.relpath(d) for d in args.dirs), scaling=scaling,
                               flags=(" --raw-phases" if args.raw_phases else "") +
                               (" --eager-figures" if args.eager_figures else "") +
                               (f" --loop-speed-exponent {args.loop_speed_exponent}" if speed else ""), **fit_summary)
    for col, (name, v) in enumerate(zip(FIGURES, x)):
        if any(s["row"][col] for s in samples):
            text += f"      {name}: {v:.1f}  # {figure_note(name, col, samples, v)}\n"
    if speed:
        rms = speed["tried"]
        text += (f"      reference_loop_us: {speed['reference_loop_s'] * 1e6:.0f}  # the figures hold where host_cpu.py's "
                 f"reference loop takes this: the median of the {speed['timed_runs']} timed fit runs' "
                 f"main-thread loops\n"
                 f"      loop_speed_exponent: {speed['exponent']:.2f}  # each figure x "
                 f"(its thread's loop / reference_loop_us) ^ this; fitted: residual rms {rms[speed['exponent']]:.1f}% "
                 f"(0: {rms.get(0.0, float('nan')):.1f}%, "
                 f"1: {rms.get(1.0, float('nan')):.1f}%)\n")
    return text + tail


def loop_speed(samples, exponent):
    """(the samples, {figures, exponent, reference_loop_s, tried, untimed}): the fit at each run's host speed
    (fit_loop_speed), the reference the median of the main-thread loops of the runs that timed it; a run that did
    not (its speed unknown) is taken at the reference. The exponent and the rms by exponent tried are printed."""
    timed_runs = {s["run"]: s["main_loop_s"] for s in samples if s["main_loop_s"]}
    reference = statistics.median(sorted(timed_runs.values()))
    untimed = sorted({s["run"] for s in samples if not s["loop_s"]})
    for s in samples:
        s["loop_s"] = s["loop_s"] or reference
    for run in untimed:
        print(f"  {run}: no timed reference loop: taken at the reference")
    x, best, tried = fit_loop_speed(samples, reference, exponent)
    print(f"host speed: reference loop {reference * 1e6:.0f} us (the median of {len(timed_runs)} runs' loops; "
          f"{len(untimed)} runs untimed); exponent {best:.2f}; residual rms by exponent: " +
          ", ".join(f"{e:.2f} {r:.1f}%" for e, r in sorted(tried.items())))
    return samples, {"figures": x, "exponent": best, "reference_loop_s": reference, "tried": tried,
                     "timed_runs": len(timed_runs), "untimed": untimed}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+",
                    help="folders of harness results (<case>.json) of lists fit, fit2 and fit3, phase-timed, "
                         "or single results")
    ap.add_argument("--cases", default=os.path.join(HERE, "cases"), help="the case folders (default: cases/)")
    ap.add_argument("--profile", help="write the hardware profile here")
    ap.add_argument("--report", help="write every sample's fit here (JSON)")
    ap.add_argument("--raw-phases", action="store_true",
                    help="fit the phases as timed, not scaled to each run's free-running step")
    ap.add_argument("--eager-figures", action="store_true",
                    help="fit eager attention's per-layer figures too (runs crossing eager and SDPA with the stages: "
                         "list fit2); without it they are left out (zsim: 0)")
    ap.add_argument("--loop-speed-exponent", metavar="fit|X",
                    help="scale each run's samples to the reference host speed by (its loop / the reference) ^ X "
                         "before fitting ('fit': the X of least residual rms on 0..1.5); runs without a timed "
                         "reference loop are left out")
    args = ap.parse_args(argv)
    runs = []
    samples = load_samples(args.dirs, args.cases, raw_phases=args.raw_phases, runs=runs)
    if not args.eager_figures:
        for s in samples:
            for name in EAGER_FIGURES:
                s["row"][FIGURES.index(name)] = 0
    if runs:
        print_ratios(runs)
    figures = sum(sampled(samples)) if samples else 0
    if len(samples) < max(figures, 1):
        print(f"fit_host: {len(samples)} samples, fewer than the {figures} figures they count", file=sys.stderr)
        return 2
    speed = None
    if args.loop_speed_exponent is not None:
        samples, speed = loop_speed(samples, args.loop_speed_exponent)
        x = speed["figures"]
        speeds = speeds_at(samples, speed["reference_loop_s"], speed["exponent"])
    else:
        x = fit(samples)
        speeds = [1.0] * len(samples)
    for s, k in zip(samples, speeds):
        s["host_speed_scale"] = k
        s["fitted_us"] = sum(a * b for a, b in zip(s["row"], x)) * k
        s["residual"] = (s["fitted_us"] - s["measured_us"]) / s["measured_us"]
    res = [s["residual"] for s in samples]
    rms = rms_percent(res)
    worst = max(samples, key=lambda s: abs(s["residual"]))
    cases = sorted({s["case"] for s in samples})
    print_figures(x, samples)
    phases = "phases as timed" if args.raw_phases else "phases scaled to free-running steps"
    print(f"fit over {len(samples)} phase samples of {len(cases)} cases ({phases}): residual rms {rms:.1f}%, "
          f"worst {worst['residual'] * 100:+.1f}% ({worst['case']} {worst['phase']})")
    if args.profile:
        summary = {"n": len(samples), "rms": rms, "worst": worst["residual"] * 100,
                   "worst_at": f"{worst['case']} {worst['phase']}"}
        text = profile_text(x, samples, args, summary, kept_tail(args.profile), speed)
        with open(args.profile, "w") as f:
            f.write(text)
    if args.report:
        fitted = [name for name, used in zip(FIGURES, sampled(samples)) if used]
        with open(args.report, "w") as f:
            json.dump({"figures_us": {k: v for k, v in zip(FIGURES, x) if k in fitted}, "phases": phases,
                       "host_speed": None if speed is None else
                       {"reference_loop_us": speed["reference_loop_s"] * 1e6, "loop_speed_exponent": speed["exponent"],
                        "rms_percent_by_exponent": speed["tried"], "untimed_runs": speed["untimed"]},
                       "residual_rms_percent": rms,
                       "samples": [{k: v for k, v in s.items() if k != "row"} for s in samples]}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
