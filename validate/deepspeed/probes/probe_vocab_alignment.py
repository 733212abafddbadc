#!/usr/bin/env python3
"""Times the LM head of a model whose vocabulary is not a multiple of 8 against a padded one, on the GPU (issue 39).

    OUT=/tmp python3 validate/deepspeed/probes/probe_vocab_alignment.py [--tokens 16384] [--hidden 768] [--repeat 50]

GPT-2's vocabulary (50,257) is not a multiple of 8, so the head's GEMMs and the logits' rows are misaligned for the
tensor cores; nanoGPT pads it to 50,304 for that reason. zsim prices the head at its aligned GEMM efficiency and
under-predicts GPT-2's GPU-bound DeepSpeed steps (docs/deepspeed-time.md, "Where it misses"). This probe measures,
for each vocabulary, what transformers' head and loss run at bf16 (CUDA events, median of --repeat):
  forward   logits = hidden @ W^T (tokens x hidden x vocab), logits.float(), log_softmax, nll_loss;
  backward  the loss's gradient back to the logits, then dX = dlogits @ W and dW = dlogits^T @ hidden;
and writes OUT/vocab_alignment.json (the GEMMs' TFLOP/s and each pass's ms per vocabulary). Torch only.
"""
import argparse
import json
import os

import torch

from cuda_timing import time_ms


def probe(vocab, tokens, hidden, repeat):
    dev, bf16 = "cuda", torch.bfloat16
    x = torch.randn(tokens, hidden, device=dev, dtype=bf16, requires_grad=True)
    w = torch.randn(vocab, hidden, device=dev, dtype=bf16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,), device=dev)
    gemm_flops = 2.0 * tokens * hidden * vocab

    def head_gemm():
        return x @ w.t()

    def loss_forward():
        logits = x @ w.t()
        return torch.nn.functional.cross_entropy(logits.float(), labels)

    def forward_backward():
        loss = loss_forward()
        loss.backward()

    grad_logits = torch.randn(tokens, vocab, device=dev, dtype=bf16)

    def backward_gemms():
        grad_logits @ w  # dX
        grad_logits.t() @ x  # dW

    with torch.no_grad():
        gemm_ms = time_ms(head_gemm, repeat)
        bwd_gemms_ms = time_ms(backward_gemms, repeat)
        fwd_ms = time_ms(loss_forward, repeat)
    step_ms = time_ms(forward_backward, repeat)
    return {
        "vocab": vocab,
        "aligned_to_8": vocab % 8 == 0,
        "head_gemm_ms": gemm_ms,
        "head_gemm_TFLOPs": gemm_flops / (gemm_ms * 1e-3) / 1e12,
        "backward_gemms_ms": bwd_gemms_ms,
        "backward_gemms_TFLOPs": 2 * gemm_flops / (bwd_gemms_ms * 1e-3) / 1e12,
        "head_and_loss_forward_ms": fwd_ms,
        "head_and_loss_forward_backward_ms": step_ms,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=16384, help="tokens of the micro-batch (8 x 2048: g124m-z1-mb8)")
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--vocabs", default="50257,50304,32000", help="comma-separated vocabulary sizes")
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_vocab_alignment: no CUDA device")
    rows = [probe(int(v), args.tokens, args.hidden, args.repeat) for v in args.vocabs.split(",")]
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "tokens": args.tokens,
              "hidden": args.hidden, "rows": rows}
    out = os.path.join(os.environ.get("OUT", "/tmp"), "vocab_alignment.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
    for r in rows:
        print(f"vocab {r['vocab']:6d}: head GEMM {r['head_gemm_ms']:.2f} ms ({r['head_gemm_TFLOPs']:.0f} TFLOP/s), "
              f"backward GEMMs {r['backward_gemms_ms']:.2f} ms ({r['backward_gemms_TFLOPs']:.0f} TFLOP/s), "
              f"head + loss forward {r['head_and_loss_forward_ms']:.2f} ms, forward + backward "
              f"{r['head_and_loss_forward_backward_ms']:.2f} ms")
    print("wrote", out)


if __name__ == "__main__":
    main()
