# Times torch's scaled_dot_product_attention with the flash backend (FlashAttention-2 in PyTorch) on the shapes
# zrun_flash_bench times, and prints the same RESULT lines (FLOPs counted the same way: forward 4 b h s^2 d / 2
# under the causal mask, backward 2.5 x forward). Device-side comparison only (torch lives on the GPU machine).
#   /opt/torch/.venv/bin/python runtime/scripts/bench_flash.py
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [(4, 32, 32, 2048, 128), (4, 32, 8, 2048, 128), (1, 32, 32, 8192, 128), (1, 32, 8, 8192, 128),
          (4, 32, 32, 2048, 64)]


def median_ms(fn, warmup=3, reps=20):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        fn()
    ms = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        ms.append(start.elapsed_time(end))
    ms.sort()
    return ms[reps // 2]


def bench(b, h, kv, s, d):
    dev, dt = "cuda", torch.bfloat16
    # zrun's layout [b, s, heads, d], seen by SDPA as [b, heads, s, d] through a transpose (the flash kernel
    # takes the strides).
    q = torch.randn(b, s, h, d, device=dev, dtype=dt).transpose(1, 2).requires_grad_()
    k = torch.randn(b, s, kv, d, device=dev, dtype=dt).transpose(1, 2).requires_grad_()
    v = torch.randn(b, s, kv, d, device=dev, dtype=dt).transpose(1, 2).requires_grad_()
    dout = torch.randn(b, h, s, d, device=dev, dtype=dt)
    how = "enable_gqa"

    def attn(q, k, v):
        if kv == h:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if how == "enable_gqa":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        # The flash backend without GQA support: kv heads repeated (autograd sums their gradients back).
        return F.scaled_dot_product_attention(q, k.repeat_interleave(h // kv, 1), v.repeat_interleave(h // kv, 1),
                                              is_causal=True)

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        if kv != h:
            try:
                attn(q, k, v)
            except RuntimeError:
                how = "repeat_interleave"
        fwd = lambda: attn(q, k, v)

        def fwdbwd():
            o = attn(q, k, v)
            o.backward(dout)

        with torch.no_grad():
            fwd_ms = median_ms(fwd)
        all_ms = median_ms(fwdbwd)
    flops = 4.0 * b * h * s * s * d / 2.0
    note = f" gqa={how}" if kv != h else ""
    print(f"RESULT torch b={b} h={h} kv={kv} s={s} d={d} fwd_ms={fwd_ms:.3f} fwdbwd_ms={all_ms:.3f} "
          f"fwd_tflops={flops / fwd_ms * 1e-9:.1f} fwdbwd_tflops={3.5 * flops / all_ms * 1e-9:.1f}{note}", flush=True)


if __name__ == "__main__":
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}", file=sys.stderr)
    shapes = [tuple(int(x) for x in sys.argv[1:6])] if len(sys.argv) >= 6 else SHAPES
    for sh in shapes:
        bench(*sh)
