"""The profile's figures from what calibrate_node.py measured: pure functions of the probes' JSON and the harness's
results (standard library only; the tests check them against the H200 records that host-h200.yaml was written from).

    gpu_preset(name, total_bytes)            zsim's GPU preset for a device name (None: no preset, say the peaks)
    gemm_figures(vocab_alignment, peak)      efficiency.gemm and efficiency.torch_misaligned_gemm
    hbm_by_kind(torch_kernels, hbm_GBps)     efficiency.hbm_by_kind, against the profile's HBM bandwidth
    copy_figures(cross_copy)                 links.pcie_GBps and the pageable (converting) copies' fractions
    cpu_adam_figures(cpu_adam)               efficiency.cpu_adam_measured.ranks_1
    outside_allocator_bytes(results)         the largest memory.device.used_outside_this_allocator over the runs
    stack_of(results, environment)           cluster.fitted_under: the versions the runs ran under
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PROBES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "probes")  # validate/deepspeed/probes/

# zsim's GPU presets (sim/scenario/presets.cpp): name -> (HBM GB/s, dense bf16 TFLOPS). The data sheet's figures the
# efficiencies below are measured against.
PRESETS = {"v100-32gb": (900, 125), "a100-40gb": (1555, 312), "a100-80gb": (2039, 312),
           "h100-80gb": (3350, 989.4), "h200-141gb": (4800, 989.4)}
GIB = 1 << 30


def gpu_preset(name, total_bytes=0):
    """The preset of a device as torch names it ("NVIDIA H100 80GB HBM3"), or None where zsim has none (an H100 PCIe
    or NVL, whose bandwidth and clocks differ from the SXM part's; any other GPU): then the caller gives the peaks."""
    n = (name or "").upper()
    if "H200" in n:
        return "h200-141gb"
    if "H100" in n:
        return None if ("PCIE" in n or "NVL" in n) else "h100-80gb"
    if "A100" in n:
        return "a100-80gb" if total_bytes > 60 * GIB or "80GB" in n else "a100-40gb"
    if "V100" in n and (total_bytes > 20 * GIB or "32GB" in n):
        return "v100-32gb"
    return None


def gemm_figures(vocab_alignment, peak_tflops):
    """(efficiency.gemm, {forward, backward} of efficiency.torch_misaligned_gemm) from probe_vocab_alignment.py's
    result: the aligned head's three GEMMs together (its forward, F FLOPs, and the two backward GEMMs, 2F, over their
    time) and the misaligned head's forward and backward each, over the preset's peak. None where the probe has no
    such row."""
    rows = vocab_alignment.get("rows") or []
    aligned = next((r for r in rows if r.get("aligned_to_8") and r.get("head_gemm_TFLOPs")), None)
    misaligned = next((r for r in rows if r.get("aligned_to_8") is False and r.get("head_gemm_TFLOPs")), None)
    gemm = None
    if aligned:
        gemm = 3 / (1 / aligned["head_gemm_TFLOPs"] + 2 / aligned["backward_gemms_TFLOPs"]) / peak_tflops
    mis = None
    if misaligned:
        mis = {"forward": misaligned["head_gemm_TFLOPs"] / peak_tflops,
               "backward": misaligned["backward_gemms_TFLOPs"] / peak_tflops}
    return gemm, mis


def _probe_module(name):
    """A probe script imported as a module (its pure functions; torch is imported there only where present)."""
    spec = importlib.util.spec_from_file_location(f"zsim_probe_{name}", os.path.join(PROBES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def hbm_by_kind(torch_kernels, hbm_GBps):
    """efficiency.hbm_by_kind from probe_torch_kernels.py's result, both families pooled as its --summarize pools them,
    against `hbm_GBps` (the profile's gpu.hbm_GBps: the probe divides by a bandwidth it looks up by the device's
    name, which may not be the preset's)."""
    pooled = _probe_module("probe_torch_kernels").pooled_figures(dict(torch_kernels, hbm_bytes_per_s=hbm_GBps * 1e9))
    return {k: v for k, v in pooled.items() if v > 0}


def copy_figures(cross_copy):
    """(links.pcie_GBps, pageable_pcie_fraction, pageable_h2d_pcie_fraction) from probe_cross_copy.py's result at its
    largest size, as host-h200.yaml took them: the pinned same-dtype copies' rate (the mean of device-to-host's mean
    and host-to-device's); device-to-host converting copies (fp32 -> bf16, bf16 -> fp32: their mean) over the pinned
    device-to-host copies' mean; host-to-device's converting copy (fp32 -> bf16) over the pinned bf16 copy up. None
    for what the result lacks."""
    rows = cross_copy.get("rows") or []
    if not rows:
        return None, None, None
    largest = max(r["elements"] for r in rows)
    at = {r["case"]: r["GBps"] for r in rows if r["elements"] == largest and r.get("GBps")}

    def mean(keys):
        vals = [at[k] for k in keys if k in at]
        return sum(vals) / len(vals) if len(vals) == len(keys) else None

    d2h_pinned, h2d_pinned = mean(["d2h_fp32_same", "d2h_bf16_same"]), mean(["h2d_bf16_same"])
    d2h_converting, h2d_converting = mean(["d2h_fp32_to_bf16", "d2h_bf16_to_fp32"]), mean(["h2d_fp32_to_bf16"])
    pcie = (d2h_pinned + h2d_pinned) / 2 if d2h_pinned and h2d_pinned else None
    d2h = d2h_converting / d2h_pinned if d2h_converting and d2h_pinned else None
    h2d = h2d_converting / h2d_pinned if h2d_converting and h2d_pinned else None
    return pcie, d2h, h2d


def cpu_adam_figures(cpu_adam):
    """{threads_<T>: params/s} of probe_cpu_adam.py's result (efficiency.cpu_adam_measured.ranks_1)."""
    return _probe_module("probe_cpu_adam").profile_figures(cpu_adam)


def outside_allocator_bytes(results):
    """The largest GPU memory outside PyTorch's caching allocator over the runs' ranks (the harness's
    memory.device.used_outside_this_allocator after the steps: CUDA context, cuBLAS, NCCL), as host-h200.yaml took
    record DS-A's one-rank runs; None where no run recorded it."""
    seen = [rank["memory"]["device"]["used_outside_this_allocator"]
            for r in results for rank in (r.get("ranks") or [])
            if ((rank.get("memory") or {}).get("device") or {}).get("used_outside_this_allocator")]
    return max(seen) if seen else None


STACK_KEYS = ("deepspeed", "torch", "transformers", "python", "cuda", "gpu")


def stack_of(results, environment=None):
    """cluster.fitted_under (but the date): each field the runs' `versions` record (the first run that has it: one
    session runs one stack), else the environment's (calibrate_node.py's own look at the machine)."""
    stack = {}
    for key in STACK_KEYS:
        for r in results:
            v = (r.get("versions") or {}).get(key)
            if v:
                stack[key] = str(v)
                break
        else:
            v = (environment or {}).get(key)
            if v:
                stack[key] = str(v)
    return stack
