#!/usr/bin/env python3
"""Fits zsim's DeepSpeed host model (efficiency.deepspeed_host) from the harness's phase-timed micro-runs.

    python3 fit_host.py RESULTS_DIR [RESULTS_DIR ...] [--profile OUT.yaml] [--report OUT.json]

Each RESULTS_DIR holds harness results (<case>.json) of list `fit` (cases.tsv: models of their own, never a
validation case), run with --phase-steps (forward, backward and the optimizer step timed apart, a synchronisation
after each). Those runs are host-bound (their kernels are short: the profiles show the GPU busy a third of the
time or less), so each phase's median wall time is the host's: a linear sum of what the host runs, with the counts
zsim's sim/engine/deepspeed_host.cpp uses (its header says where each comes from):

  forward   = forward_fixed + L x {llama,gpt2}_forward_layer + [ckpt] L x checkpoint_forward_layer
              + [stage 3] (13 L + model modules) x stage3_forward_module
  backward  = backward_fixed + L x {llama,gpt2}_backward_layer + [ckpt] L x recompute_layer
              + [stage 3] (13 L + model modules) x stage3_backward_module + [stage 3, ckpt] 13 L x stage3_forward_module
  step      = step_fixed + P x (stage 3 ? stage3_step_param : step_param)

fitted together by least squares (every phase of every run one sample; a run repeated in several results
directories counts each time), figures that come out negative dropped and the rest fitted again. Runs with CPU
offload are left out (their phases wait for PCIe and CPU Adam, which other figures price). Writes the profile
(cluster.efficiency.deepspeed_host.*, each figure with its samples and the fit's residuals) and a report of every
sample's fit. Standard library only.
"""
import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
HOOKS_PER_LAYER = 13
FIGURES = ["forward_fixed_us", "llama_forward_layer_us", "gpt2_forward_layer_us", "checkpoint_forward_layer_us",
           "stage3_forward_module_us", "backward_fixed_us", "llama_backward_layer_us", "gpt2_backward_layer_us",
           "recompute_layer_us", "stage3_backward_module_us", "step_fixed_us", "step_param_us", "stage3_step_param_us"]


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
    return {
        "layers": layers,
        "gpt2": gpt2,
        "modules": HOOKS_PER_LAYER * layers + (7 if gpt2 else 6),
        # transformers' parameter tensors: GPT-2 12 a block (+ wte, wpe, ln_f's two); Llama 9 a layer (+ embedding,
        # norm, head unless tied)
        "params": 12 * layers + 4 if gpt2 else 9 * layers + 2 + (0 if tied else 1),
        "stage": int(zero.get("stage", 0)),
        "ckpt": case["checkpointing"] == "full",
        "offload": "offload_optimizer" in zero or "offload_param" in zero,
    }


def features(st, phase):
    """The sample's row over FIGURES for one phase."""
    z3, ck, L = st["stage"] == 3, st["ckpt"], st["layers"]
    row = dict.fromkeys(FIGURES, 0.0)
    if phase == "forward":
        row["forward_fixed_us"] = 1
        row["gpt2_forward_layer_us" if st["gpt2"] else "llama_forward_layer_us"] = L
        row["checkpoint_forward_layer_us"] = L if ck else 0
        row["stage3_forward_module_us"] = st["modules"] if z3 else 0
    elif phase == "backward":
        row["backward_fixed_us"] = 1
        row["gpt2_backward_layer_us" if st["gpt2"] else "llama_backward_layer_us"] = L
        row["recompute_layer_us"] = L if ck else 0
        row["stage3_backward_module_us"] = st["modules"] if z3 else 0
        row["stage3_forward_module_us"] = HOOKS_PER_LAYER * L if (z3 and ck) else 0
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


def fit(samples):
    """Non-negative figures: fit, drop the negative ones, fit again."""
    rows = [s["row"] for s in samples]
    ys = [s["measured_us"] for s in samples]
    active = [any(r[i] for r in rows) for i in range(len(FIGURES))]
    while True:
        x = solve(rows, ys, active)
        neg = [i for i, v in enumerate(x) if active[i] and v < 0]
        if not neg:
            return x
        for i in neg:
            active[i] = False


def load_samples(dirs, cases_dir):
    samples = []
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
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
            if st["offload"]:
                continue
            for ph in ("forward", "backward", "step"):
                if phases.get(ph):
                    samples.append({"run": os.path.relpath(path), "case": name, "phase": ph,
                                    "measured_us": phases[ph] * 1e6, "row": features(st, ph)})
    return samples


PROFILE_HEAD = """# zsim hardware profile: one NVIDIA H200 running DeepSpeed 0.14.5 + torch 2.11 + transformers 5.17 (bf16), the
# host's figures of a DeepSpeed step (efficiency.deepspeed_host) fitted by validate/deepspeed/fit_host.py from the
# phase-timed micro-runs of list `fit` (never a validation case): {runs}.
# Command: python3 validate/deepspeed/fit_host.py {dirs} --profile validate/deepspeed/host-h200.yaml
# make_cases.py writes these figures into every case's scenario (cluster.efficiency.deepspeed_host). docs/deepspeed-time.md.
# Fit over {n} phase samples: residual rms {rms:.1f}%, worst {worst:+.1f}% ({worst_at}).
description: "NVIDIA H200 under DeepSpeed 0.14.5 + torch 2.11 + transformers 5.17: the host's figures of a DeepSpeed step, fitted from micro-runs"
cluster:
  efficiency:
    deepspeed_host:
"""

# Kept as it is when the host's figures are fitted again: the outside-the-allocator figure measured from record DS-A
# (docs/deepspeed-memory.md "Outside the allocator").
PROFILE_TAIL = """    # GPU memory a DeepSpeed process holds outside PyTorch's caching allocator (CUDA context and modules, cuBLAS / cuDNN
    # handles, NCCL), which the GPU verdict adds to the allocator's reserved peak: the harness's memory.device
    # (mem_get_info's used minus torch.cuda.memory_reserved, after the steps) of the 23 one-rank runs of record DS-A
    # (validate/results/h200-deepspeed/runs/*-w1-*.json): 1.28-1.30 GiB at stages 0-2 (16 runs), 1.66-1.69 GiB at
    # stage 3 (7 runs). The largest (l1.3b-z3-w1-mb2-s2048-sdpa-ckpt-offopt), one figure for every stage.
    outside_allocator_bytes: 1816985600
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", help="folders of harness results (<case>.json) of list fit, phase-timed")
    ap.add_argument("--cases", default=os.path.join(HERE, "cases"), help="the case folders (default: cases/)")
    ap.add_argument("--profile", help="write the hardware profile here")
    ap.add_argument("--report", help="write every sample's fit here (JSON)")
    args = ap.parse_args(argv)
    samples = load_samples(args.dirs, args.cases)
    if len(samples) < len(FIGURES):
        print(f"fit_host: {len(samples)} samples, fewer than the {len(FIGURES)} figures", file=sys.stderr)
        return 2
    x = fit(samples)
    for s in samples:
        s["fitted_us"] = sum(a * b for a, b in zip(s["row"], x))
        s["residual"] = (s["fitted_us"] - s["measured_us"]) / s["measured_us"]
    res = [s["residual"] for s in samples]
    rms = (sum(r * r for r in res) / len(res)) ** 0.5 * 100
    worst = max(samples, key=lambda s: abs(s["residual"]))
    runs = sorted({s["case"] for s in samples})
    for name, v in zip(FIGURES, x):
        used = [s for s, r in zip(samples, (s["row"][FIGURES.index(name)] for s in samples)) if r]
        print(f"{name:30s} {v:10.1f} us   ({len(used)} samples)")
    print(f"fit over {len(samples)} phase samples of {len(runs)} cases: residual rms {rms:.1f}%, worst "
          f"{worst['residual'] * 100:+.1f}% ({worst['case']} {worst['phase']})")
    if args.profile:
        text = PROFILE_HEAD.format(runs=", ".join(runs), dirs=" ".join(os.path.relpath(d) for d in args.dirs),
                                   n=len(samples), rms=rms, worst=worst["residual"] * 100,
                                   worst_at=f"{worst['case']} {worst['phase']}")
        for name, v in zip(FIGURES, x):
            col = FIGURES.index(name)
            used = [s for s in samples if s["row"][col]]
            note = (f"{len(used)} samples; their residual rms "
                    f"{(sum(s['residual'] ** 2 for s in used) / len(used)) ** 0.5 * 100:.1f}%" if used
                    else "no sample: not fitted")
            if used and v == 0:
                note += "; fitted negative, dropped (0)"
            text += f"      {name}: {v:.1f}  # {note}\n"
        text += PROFILE_TAIL
        with open(args.profile, "w") as f:
            f.write(text)
    if args.report:
        with open(args.report, "w") as f:
            json.dump({"figures_us": dict(zip(FIGURES, x)), "residual_rms_percent": rms,
                       "samples": [{k: v for k, v in s.items() if k != "row"} for s in samples]}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
