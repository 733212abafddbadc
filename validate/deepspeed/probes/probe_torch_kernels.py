#!/usr/bin/env python3
"""Times transformers' memory-bound kernels as torch runs them, per kind of zsim's HBM efficiencies (issue 39).

    OUT=/tmp python3 validate/deepspeed/probes/probe_torch_kernels.py [--repeat 30]

Under runtime deepspeed zsim prices each unit's elementwise ops, casts and their derivatives by their bytes
(sim/plan/transformers_kernels.hpp) at efficiency.hbm_by_kind of their kind. This probe runs the same ops with
transformers' own modules where it has them, at bf16 on the GPU, forward and backward (CUDA events, the median of
--repeat after three warm-ups), and divides zsim's bytes for them by the time and the GPU's HBM bandwidth: the
efficiency at which zsim's bytes take the measured time. Per family (Llama: RMSNorm, SiLU x up, eager scores with the
fp32 softmax; GPT-2: LayerNorm, gelu_new, eager scores with dropout 0.1) and kind:
  norm           the final norm alone (Llama 36 / 76 bytes an element, GPT-2 4 / 10)
  activation     SiLU(gate) x up (10 / 18 bytes an ffn element), gelu_new (36 / 72)
  softmax        eager_attention_forward's scores between its two GEMMs: * scaling, + the 4-D mask, softmax (Llama in
                 fp32 and cast back), GPT-2's dropout (zsim's 24 / 28 and 21 / 23 bytes a score; these include the
                 GEMMs' operand share, 2 / 4 bytes, which the GEMM kernels move: the efficiency is of the whole charge)
  cross_entropy  transformers' causal-LM loss: logits.float(), cross_entropy (14 / 22 bytes a logit)
Writes OUT/torch_kernels.json: per row the shape, zsim's bytes, the milliseconds and the efficiency. Torch (and
transformers where present) only; a row that fails records its error and the rest run.

    python3 validate/deepspeed/probes/probe_torch_kernels.py --summarize torch_kernels.json

prints the figures a profile takes (efficiency.hbm_by_kind, both families pooled: their bytes over their times).
"""
import argparse
import json
import os
import statistics
import traceback

try:  # --summarize needs neither
    import torch
    import torch.nn.functional as F

    from cuda_timing import event_ms, time_ms
except ImportError:
    torch = F = None

HBM_BYTES_PER_S = {"NVIDIA H200": 4.8e12, "NVIDIA H100 80GB HBM3": 3.35e12}


def forward_backward_ms(make_inputs, forward, repeat):
    """(forward ms, backward ms): forward timed alone; backward timed alone after an untimed forward."""
    inputs = make_inputs()
    fwd = time_ms(lambda: forward(*inputs), repeat)
    state = {}

    def run_backward():
        out = state.pop("out")
        out.backward(state.pop("grad"))

    times = []
    for i in range(repeat + 3):
        for t in inputs:
            if t.requires_grad:
                t.grad = None
        out = forward(*inputs)
        state["out"], state["grad"] = out, torch.randn_like(out)
        ms = event_ms(run_backward)
        if i >= 3:
            times.append(ms)
    return fwd, statistics.median(times)


def leaf(*shape, dtype=None):
    dtype = dtype or torch.bfloat16
    return torch.randn(*shape, device="cuda", dtype=dtype).requires_grad_(True)


def causal_mask(b, s):
    """transformers' 4-D additive mask for eager attention: 0 where allowed, the dtype's min elsewhere."""
    m = torch.full((s, s), torch.finfo(torch.bfloat16).min, device="cuda", dtype=torch.bfloat16).triu(1)
    return m[None, None].expand(b, 1, s, s)


def rms_norm(h):
    try:
        from transformers.models.llama.modeling_llama import LlamaRMSNorm
        return LlamaRMSNorm(h).cuda().to(torch.bfloat16), "transformers LlamaRMSNorm"
    except Exception:  # the same code, as modeling_llama.py writes it
        class RMS(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = torch.nn.Parameter(torch.ones(h))

            def forward(self, x):
                dt = x.dtype
                x = x.to(torch.float32)
                x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
                return self.weight * x.to(dt)
        return RMS().cuda().to(torch.bfloat16), "copy of LlamaRMSNorm"


def new_gelu():
    try:
        from transformers.activations import NewGELUActivation
        return NewGELUActivation(), "transformers NewGELUActivation"
    except Exception:
        import math

        def f(x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        return f, "copy of NewGELUActivation"


def rows_for(family, cfg, tokens, b, s, repeat):
    h, f, heads, vocab = cfg["hidden"], cfg["ffn"], cfg["heads"], cfg["vocab"]
    rows = []

    def add(kind, what, shape, fwd_bytes, bwd_bytes, make_inputs, forward):
        row = {"family": family, "kind": kind, "what": what, "shape": shape,
               "zsim_forward_bytes": fwd_bytes, "zsim_backward_bytes": bwd_bytes}
        try:
            fwd_ms, bwd_ms = forward_backward_ms(make_inputs, forward, repeat)
            row.update({"forward_ms": fwd_ms, "backward_ms": bwd_ms})
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
            row["traceback"] = traceback.format_exc().splitlines()[-6:]
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "traceback"}), flush=True)

    if family == "llama":
        norm, what = rms_norm(h)
        add("norm", what, [tokens, h], 36 * h * tokens, 76 * h * tokens, lambda: (leaf(tokens, h),), norm)
        add("activation", "silu(gate) * up", [tokens, f], 10 * f * tokens, 18 * f * tokens,
            lambda: (leaf(tokens, f), leaf(tokens, f)), lambda g, u: F.silu(g) * u)
    else:
        ln = torch.nn.LayerNorm(h).cuda().to(torch.bfloat16)
        add("norm", "torch LayerNorm", [tokens, h], 4 * h * tokens, 10 * h * tokens, lambda: (leaf(tokens, h),), ln)
        gelu, what = new_gelu()
        add("activation", what, [tokens, f], 36 * f * tokens, 72 * f * tokens, lambda: (leaf(tokens, f),), gelu)

    n = b * heads * s * s
    mask = causal_mask(b, s)
    scaling = (h // heads) ** -0.5
    if family == "llama":
        def scores(w):
            w = (w * scaling) + mask
            return F.softmax(w, dim=-1, dtype=torch.float32).to(torch.bfloat16)
        add("softmax", "scale, mask add, softmax(fp32), cast", [b, heads, s, s], 24 * n, 28 * n,
            lambda: (leaf(b, heads, s, s),), scores)
    else:
        def scores(w):
            w = (w * scaling) + mask
            w = F.softmax(w, dim=-1).type(torch.bfloat16)
            return F.dropout(w, p=0.1, training=True)
        add("softmax", "scale, mask add, softmax, dropout 0.1", [b, heads, s, s], 21 * n, 23 * n,
            lambda: (leaf(b, heads, s, s),), scores)

    labels = torch.randint(0, vocab, (tokens,), device="cuda")

    def loss(logits):
        return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum") / tokens
    add("cross_entropy", "logits.float(), cross_entropy", [tokens, vocab], 14 * vocab * tokens, 22 * vocab * tokens,
        lambda: (leaf(tokens, vocab),), loss)
    return rows


def pooled_figures(result):
    """Per kind and pass, over both families: zsim's bytes over the measured time over the HBM's rate (the families'
    rows pooled by their bytes and times, as a step runs whichever it runs), as efficiency.hbm_by_kind keys."""
    figures = {}
    for kind in ("norm", "activation", "softmax", "cross_entropy"):
        for p, key in (("forward", kind), ("backward", kind + "_backward")):
            rows = [r for r in result["rows"] if r["kind"] == kind and r.get(f"{p}_ms")]
            if rows:
                moved = sum(r[f"zsim_{p}_bytes"] for r in rows)
                seconds = sum(r[f"{p}_ms"] for r in rows) * 1e-3
                figures[key] = moved / seconds / result["hbm_bytes_per_s"]
    return figures


def summarize(path):
    """Prints a torch_kernels.json's pooled figures as a profile's hbm_by_kind block."""
    with open(path) as f:
        result = json.load(f)
    print(f"    hbm_by_kind:  # {path}: {result['device']}, torch {result['torch']}")
    for key, value in pooled_figures(result).items():
        print(f"      {key}: {value:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summarize", metavar="JSON", help="print a torch_kernels.json's hbm_by_kind figures and exit")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=2048)
    args = ap.parse_args()
    if args.summarize:
        return summarize(args.summarize)
    name = torch.cuda.get_device_name(0)
    bw = HBM_BYTES_PER_S.get(name, 4.8e12)
    families = {"llama": {"hidden": 2048, "ffn": 5632, "heads": 16, "vocab": 32000},
                "gpt2": {"hidden": 768, "ffn": 3072, "heads": 12, "vocab": 50257}}
    rows = []
    for family, cfg in families.items():
        rows += rows_for(family, cfg, args.tokens, args.batch, args.seq, args.repeat)
    for r in rows:
        for p in ("forward", "backward"):
            if r.get(f"{p}_ms"):
                r[f"{p}_efficiency"] = r[f"zsim_{p}_bytes"] / (r[f"{p}_ms"] * 1e-3) / bw
    out = {"device": name, "torch": torch.__version__, "hbm_bytes_per_s": bw, "families": families,
           "tokens": args.tokens, "batch": args.batch, "seq": args.seq, "rows": rows}
    try:
        import transformers
        out["transformers"] = transformers.__version__
    except Exception:
        out["transformers"] = None
    path = os.path.join(os.environ.get("OUT", "."), "torch_kernels.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    for r in rows:
        print(f"{r['family']:6s} {r['kind']:14s} fwd {r.get('forward_ms', float('nan')):8.3f} ms "
              f"eff {r.get('forward_efficiency', float('nan')):.3f}  bwd {r.get('backward_ms', float('nan')):8.3f} ms "
              f"eff {r.get('backward_efficiency', float('nan')):.3f}  {r.get('error', '')}")
    print("wrote", path)


if __name__ == "__main__":
    main()
