#!/usr/bin/env python3
"""Times torch's copies between the GPU and the CPU that change the dtype on the way (issue 39: stage 3's offload).

    OUT=/tmp python3 validate/deepspeed/probes/probe_cross_copy.py [--elements 268435456] [--repeat 5]

DeepSpeed 0.14.5's stage 3 with CPU offload moves its tensors with `dst.copy_(src)` across devices and dtypes: with
the parameters on the CPU, the step's `fp16_partitioned_groups_flat[i].data.copy_(fp32_partitioned_groups_flat[i])`
(fp32 on the GPU into the pinned 16-bit flat buffer on the CPU: stage3.py `_reassign_or_swap_out_partitioned_parameters`);
with the optimizer on the CPU, backward's `partition_grads` (16-bit gradients into the pinned fp32 buffer) and the
step's copy of the updated fp32 master into the GPU's 16-bit partition. A profiled step (record
validate/results/h200-deepspeed-steptime/probes/offload-3/) shows those copies far slower than PCIe. torch converts a
cross-device copy's dtype on the CPU, through a temporary CPU tensor, so a pinned destination does not make the
transfer pinned. This probe times, for each direction and dtype pair, `dst.copy_(src)` of --elements elements into
a pinned destination, and the same-dtype pinned copy beside it (the link's own rate), --repeat times after one
warming copy (the median; each with a synchronisation). It writes OUT/cross_copy.json: per case the seconds, the
bytes that cross as torch stages them (the source's dtype device-to-host, the destination's host-to-device) and the
rate. Torch on the device.
"""
import argparse
import json
import os
import statistics
import time


def timed(fn, repeat):
    import torch
    fn()
    torch.cuda.synchronize()
    seconds = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - t0)
    return statistics.median(seconds)


CASES = [  # (name, source device, source dtype, destination device, destination dtype)
    ("d2h_fp32_to_bf16", "cuda", "float32", "cpu", "bfloat16"),     # offload_param: the step's write-back
    ("d2h_bf16_to_fp32", "cuda", "bfloat16", "cpu", "float32"),     # offload_optimizer: partition_grads
    ("h2d_fp32_to_bf16", "cpu", "float32", "cuda", "bfloat16"),     # offload_optimizer: the step's copy up
    ("d2h_fp32_same", "cuda", "float32", "cpu", "float32"),         # the link, pinned
    ("d2h_bf16_same", "cuda", "bfloat16", "cpu", "bfloat16"),
    ("h2d_bf16_same", "cpu", "bfloat16", "cuda", "bfloat16"),
]


def probe(elements, repeat):
    import torch
    rows = []
    for name, sdev, sdt, ddev, ddt in CASES:
        sdt_, ddt_ = getattr(torch, sdt), getattr(torch, ddt)
        src = torch.ones(elements, dtype=sdt_, device=sdev, pin_memory=(sdev == "cpu"))
        dst = torch.empty(elements, dtype=ddt_, device=ddev, pin_memory=(ddev == "cpu"))
        s = timed(lambda: dst.copy_(src), repeat)
        crossing = elements * (src.element_size() if ddev == "cpu" else dst.element_size())
        rows.append({"case": name, "elements": elements, "seconds": s, "crossing_bytes": crossing,
                     "GBps": crossing / s / 1e9, "elements_per_s": elements / s})
        del src, dst
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elements", type=int, default=1 << 28)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    import torch
    rows = probe(args.elements, args.repeat) + probe(args.elements // 4, args.repeat)
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "rows": rows}
    for r in rows:
        print(f"{r['case']:20s} {r['elements']:>11d} elements  {r['seconds'] * 1e3:9.2f} ms  {r['GBps']:7.2f} GB/s "
              f"crossing  {r['elements_per_s'] / 1e9:6.3f} G elements/s")
    with open(os.path.join(os.environ.get("OUT", "."), "cross_copy.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
