#!/usr/bin/env python3
"""Writes the hardware profiles scenarios/hardware/<platform>-ib<gbps>.yaml from the table below.

One platform (GPU, host, NVMe, NVLink, PCIe, efficiencies) x one InfiniBand speed per GPU. Every number
carries its source in a comment; docs/hardware-profiles.md explains them. Edit this table, then run
`python3 scenarios/hardware/make_profiles.py` and commit the regenerated YAML files.
"""
import pathlib

GiB = 1024**3

# InfiniBand per GPU: line rate in Gb/s -> achieved GB/s. nccl-tests inter-node bus bandwidth reaches ~92% of
# the line rate (e.g. ~46 GB/s per 400 Gb/s NDR NIC); 1 Gb/s = 0.125 GB/s.
IB_EFFICIENCY = 0.92
IB_SPEEDS = {100: "EDR/HDR100", 200: "HDR", 400: "NDR", 800: "XDR"}

# Per-step latencies: NCCL's tuning model (src/graph/tuning.cc, hwLat for Ring) uses 0.47 / 1.9 / 3.4 us per
# NVLink step and 2.7 / 4.0 / 9.6 us per network step for the LL / LL128 / Simple protocols; zsim has one
# protocol, so it takes values between LL128 and Simple.
NVL_LAT = "per ring step inside a node; NCCL tuning.cc hwLat NVLink ring: 1.9 (LL128) - 3.4 (Simple) us"
IB_LAT = "per ring step between nodes; NCCL tuning.cc hwLat network ring: 4.0 (LL128) - 9.6 (Simple) us"

# Fixed cost of one kernel launch in a compute op (zsim charges it per launch the schedule gives the op beyond its
# GEMM model's calls; docs/timing.md): the only measurement is zrun calibrate's on this workplace's H100, an empty
# kernel launched back to back on one stream (host-side launch rate, set by the CPU and driver more than the GPU).
LAUNCH_US = 3.4
LAUNCH_MEASURED = ("empty kernel launch to launch, 3.42 us measured by zrun calibrate on this workplace's H100 "
                   "(validate/results/h100/calibrated-h100.yaml, calibration.launch_overhead_us)")
LAUNCH_ESTIMATE = ("estimate: the H100's measured empty-kernel launch to launch (3.42 us, zrun calibrate); "
                   "not measured on this platform")

PLATFORMS = {
    "v100-dgx2": dict(
        title="NVIDIA DGX-2: 16x V100-SXM3 32GB on NVSwitch",
        gpus_per_node=(16, "DGX-2: 16 GPUs on 12 NVSwitches (NVIDIA blog 'NVSwitch Accelerates NVIDIA DGX-2')"),
        gpu=dict(
            name=("v100-32gb", "Tesla V100 SXM3 32GB"),
            hbm_bytes=(32 * GiB, "32 GB HBM2 (V100 datasheet)"),
            hbm_GBps=(900, "V100 datasheet: 900 GB/s HBM2"),
            peak_tflops=(125, "V100 datasheet: 125 TFLOPS fp16 tensor core (no bf16 on Volta)"),
            peak_fp32_tflops=(15.7, "V100 SXM datasheet: 15.7 TFLOPS fp32"),
        ),
        host=dict(
            memory_bytes=(1536 * GiB, "DGX-2: 1.5 TB DDR4 (NVIDIA DGX-2 blog)"),
            cores=(48, "DGX-2: two 24-core Xeon Platinum 8168 (NVIDIA DGX-2 blog)"),
        ),
        nvme=dict(
            bytes=(30 * 10**12, "DGX-2: 30 TB NVMe (NVIDIA DGX-2 blog)"),
            read_GBps=(25, "estimate: 8 NVMe Gen3 drives x ~3 GB/s sequential read, RAID-0"),
            write_GBps=(12, "estimate: 8 NVMe Gen3 drives x ~1.5 GB/s sequential write, RAID-0"),
        ),
        links=dict(
            nvlink_GBps=(123, "150 GB/s per direction (6 NVLink2 x 25 GB/s) x 0.82 NCCL protocol efficiency "
                              "(NVIDIA/nccl-tests#212: 370 of 450 GB/s on H100)"),
            pcie_GBps=(12, "PCIe Gen3 x16: 15.75 GB/s line rate, ~12 GB/s pinned cudaMemcpy"),
            nvlink_latency_us=(2.0, NVL_LAT),
            pcie_latency_us=(2.0, "cudaMemcpyAsync launch + DMA setup (estimate)"),
            ib_latency_us=(5.0, IB_LAT),
            ib_oversubscription=(1.0, "non-blocking fat tree (DGX SuperPOD design)"),
            nodes_per_leaf=(0, "0 = all nodes under one leaf; set for large clusters"),
        ),
        efficiency=dict(
            gemm=(0.5, "V100 transformer GEMMs reach ~60 of 125 TFLOPS; ZeRO (arXiv 1910.02054) reports "
                       "38 TFLOPS/GPU end to end"),
            hbm=(0.85, "STREAM-like copy kernels reach ~85% of HBM peak (estimate)"),
            cpu_adam_params_per_s_per_core=(1.0e8, "DeepSpeedCPUAdam, AVX-512, ~1e8 params/s per core "
                                                   "(ZeRO-Offload, arXiv 2101.06840; estimate)"),
            pageable_pcie_fraction=(0.5, "pageable copies stage through a pinned buffer: ~half of pinned "
                                         "(NVIDIA blog 'How to Optimize Data Transfers in CUDA C/C++')"),
            launch_us=(LAUNCH_US, LAUNCH_ESTIMATE),
        ),
    ),
    "a100-hgx": dict(
        title="NVIDIA HGX / DGX A100: 8x A100-SXM4 80GB on NVSwitch",
        gpus_per_node=(8, "HGX A100 8-GPU baseboard"),
        gpu=dict(
            name=("a100-80gb", "A100 SXM4 80GB"),
            hbm_bytes=(80 * GiB, "80 GB HBM2e (A100 datasheet)"),
            hbm_GBps=(2039, "A100 80GB SXM datasheet: 2,039 GB/s"),
            peak_tflops=(312, "A100 datasheet: 312 TFLOPS dense bf16/fp16 tensor core"),
            peak_fp32_tflops=(19.5, "A100 datasheet: 19.5 TFLOPS fp32 (non-tensor)"),
        ),
        host=dict(
            memory_bytes=(2048 * GiB, "DGX A100 640GB: 2 TB system memory (DGX A100 datasheet)"),
            cores=(128, "DGX A100: two 64-core AMD EPYC 7742 (DGX A100 datasheet)"),
        ),
        nvme=dict(
            bytes=(30 * 10**12, "DGX A100 640GB: 30 TB internal NVMe (DGX A100 datasheet)"),
            read_GBps=(25, "estimate: 8 NVMe Gen4 U.2 drives, RAID-0, sequential read"),
            write_GBps=(12, "estimate: 8 NVMe Gen4 U.2 drives, RAID-0, sequential write"),
        ),
        links=dict(
            nvlink_GBps=(210, "measured NCCL busbw on 8x A100 NVSwitch: ~200-210 GB/s "
                              "(NVIDIA/nccl-tests#149, #178) of 300 GB/s per direction"),
            pcie_GBps=(24, "PCIe Gen4 x16: 31.5 GB/s line rate, ~24 GB/s pinned cudaMemcpy"),
            nvlink_latency_us=(2.0, NVL_LAT),
            pcie_latency_us=(2.0, "cudaMemcpyAsync launch + DMA setup (estimate)"),
            ib_latency_us=(5.0, IB_LAT),
            ib_oversubscription=(1.0, "non-blocking fat tree (DGX SuperPOD reference architecture)"),
            nodes_per_leaf=(20, "DGX A100 SuperPOD scalable unit: 20 nodes"),
        ),
        efficiency=dict(
            gemm=(0.6, "Megatron-LM (arXiv 2104.04473): 163 TFLOPS/GPU end to end on GPT-3 175B = 52% "
                       "of peak; GEMMs alone run higher"),
            hbm=(0.85, "STREAM-like copy kernels reach ~85% of HBM peak (estimate)"),
            cpu_adam_params_per_s_per_core=(1.0e8, "DeepSpeedCPUAdam ~1e8 params/s per core (estimate)"),
            pageable_pcie_fraction=(0.4, "estimate: pageable copies are staged by the CPU at ~9-14 GB/s "
                                         "(measured on an H100 host here), ~0.4 of 24 GB/s pinned"),
            launch_us=(LAUNCH_US, LAUNCH_ESTIMATE),
        ),
    ),
    "h100-hgx": dict(
        title="NVIDIA HGX / DGX H100: 8x H100-SXM5 80GB on NVSwitch",
        gpus_per_node=(8, "HGX H100 8-GPU baseboard"),
        gpu=dict(
            name=("h100-80gb", "H100 SXM5 80GB"),
            hbm_bytes=(80 * GiB, "80 GB HBM3 (H100 datasheet)"),
            hbm_GBps=(3350, "H100 SXM datasheet: 3.35 TB/s"),
            peak_tflops=(989, "H100 SXM datasheet: 1,979 TFLOPS bf16 with sparsity = 989 dense"),
            peak_fp32_tflops=(67, "H100 SXM datasheet: 67 TFLOPS fp32"),
        ),
        host=dict(
            memory_bytes=(2048 * GiB, "DGX H100: 2 TB system memory (DGX H100 datasheet)"),
            cores=(112, "DGX H100: two 56-core Xeon Platinum 8480C (DGX H100 datasheet)"),
        ),
        nvme=dict(
            bytes=(30 * 10**12, "DGX H100: 8x 3.84 TB NVMe U.2 internal storage (DGX H100 datasheet)"),
            read_GBps=(25, "estimate: 8 NVMe Gen4 drives, RAID-0, sequential read"),
            write_GBps=(12, "estimate: 8 NVMe Gen4 drives, RAID-0, sequential write"),
        ),
        links=dict(
            nvlink_GBps=(370, "NVLink4 450 GB/s per direction; NCCL reaches ~370 GB/s busbw "
                              "(NVIDIA/nccl-tests#212, sjeaugey)"),
            pcie_GBps=(55, "PCIe Gen5 x16: 55.0 GB/s pinned H2D, 55.1 D2H measured on an H100 here (probes/pcie_copy_probe.cu)"),
            nvlink_latency_us=(2.0, NVL_LAT),
            pcie_latency_us=(2.0, "cudaMemcpyAsync launch + DMA setup (estimate)"),
            ib_latency_us=(5.0, IB_LAT),
            ib_oversubscription=(1.0, "non-blocking fat tree (DGX SuperPOD reference architecture)"),
            nodes_per_leaf=(32, "DGX H100 SuperPOD scalable unit: 32 nodes"),
        ),
        efficiency=dict(
            gemm=(0.55, "large bf16 GEMMs reach ~600-700 of 989 TFLOPS; transformer layers incl. attention "
                        "and small GEMMs ~55% (estimate)"),
            hbm=(0.9, "cudaMemcpy D2D of 1 GiB measured at 1509 GB/s copied = 3018 GB/s read+write of 3350 on an H100 here"),
            cpu_adam_params_per_s_per_core=(1.0e8, "DeepSpeedCPUAdam ~1e8 params/s per core (estimate)"),
            pageable_pcie_fraction=(0.2, "measured on an H100 here: pageable H2D 8.3-9.6, D2H 14.1-14.6 GB/s vs 55 pinned"),
            launch_us=(LAUNCH_US, LAUNCH_MEASURED),
        ),
    ),
    "h200-hgx": dict(
        title="NVIDIA HGX / DGX H200: 8x H200-SXM 141GB on NVSwitch",
        gpus_per_node=(8, "HGX H200 8-GPU baseboard"),
        gpu=dict(
            name=("h200-141gb", "H200 SXM 141GB"),
            hbm_bytes=(141 * 10**9, "141 GB HBM3e (H200 datasheet)"),
            hbm_GBps=(4800, "H200 datasheet: 4.8 TB/s"),
            peak_tflops=(989, "H200 datasheet: same tensor cores as H100 SXM, 989 TFLOPS dense bf16"),
            peak_fp32_tflops=(67, "H200 datasheet: 67 TFLOPS fp32"),
        ),
        host=dict(
            memory_bytes=(2048 * GiB, "DGX H200: 2 TB system memory (DGX H200 datasheet)"),
            cores=(112, "DGX H200: two 56-core Xeon Platinum 8480C (DGX H200 datasheet)"),
        ),
        nvme=dict(
            bytes=(30 * 10**12, "DGX H200: 8x 3.84 TB NVMe U.2 internal storage (DGX H200 datasheet)"),
            read_GBps=(25, "estimate: 8 NVMe Gen4 drives, RAID-0, sequential read"),
            write_GBps=(12, "estimate: 8 NVMe Gen4 drives, RAID-0, sequential write"),
        ),
        links=dict(
            nvlink_GBps=(370, "NVLink4 450 GB/s per direction; NCCL ~370 GB/s busbw on 8 GPUs "
                              "(NVIDIA/nccl-tests#212); 330 GB/s all-gather/reduce-scatter measured on 4x H200 here"),
            pcie_GBps=(55, "PCIe Gen5 x16: ~55 GB/s pinned H2D measured on this workplace's H200 machine"),
            nvlink_latency_us=(2.0, NVL_LAT),
            pcie_latency_us=(2.0, "cudaMemcpyAsync launch + DMA setup (estimate)"),
            ib_latency_us=(5.0, IB_LAT),
            ib_oversubscription=(1.0, "non-blocking fat tree (DGX SuperPOD reference architecture)"),
            nodes_per_leaf=(32, "DGX SuperPOD scalable unit: 32 nodes"),
        ),
        efficiency=dict(
            gemm=(0.55, "same tensor cores as H100 (estimate, see h100-hgx)"),
            hbm=(0.875, "device-to-device copy measured at 4.2 of 4.8 TB/s on this workplace's H200"),
            cpu_adam_params_per_s_per_core=(1.0e8, "DeepSpeedCPUAdam ~1e8 params/s per core (estimate)"),
            pageable_pcie_fraction=(0.2, "as measured on an H100 host here: pageable ~9 (H2D) / ~14 (D2H) of 55 GB/s"),
            launch_us=(LAUNCH_US, LAUNCH_ESTIMATE),
        ),
    ),
}


def scalar(v):
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return repr(v) if abs(v) < 1e6 else f"{v:.1e}"
    return str(v)


def render(platform, p, ib_gbps):
    lines = [f"# {p['title']}, InfiniBand {ib_gbps} Gb/s ({IB_SPEEDS[ib_gbps]}) per GPU, one NIC per GPU (rail-aligned).",
             "# Generated by scenarios/hardware/make_profiles.py; sources: docs/hardware-profiles.md.",
             "# Bandwidths are achieved (not line-rate) figures in GB/s = 1e9 bytes/s, one direction, per GPU",
             "# unless noted; a scenario's cluster block overrides any key.",
             "cluster:"]
    g, note = p["gpus_per_node"]
    lines.append(f"  gpus_per_node: {g}  # {note}")
    ib_GBps = round(ib_gbps / 8 * IB_EFFICIENCY, 2)
    for block in ("gpu", "host", "nvme", "links", "efficiency"):
        lines.append(f"  {block}:")
        items = list(p[block].items())
        if block == "links":
            items.insert(2, ("ib_GBps", (ib_GBps, f"{ib_gbps} Gb/s = {ib_gbps / 8:g} GB/s line rate x "
                                                  f"{IB_EFFICIENCY} achieved (nccl-tests inter-node busbw)")))
        for key, (value, source) in items:
            lines.append(f"    {key}: {scalar(value)}  # {source}")
    return "\n".join(lines) + "\n"


def main():
    here = pathlib.Path(__file__).resolve().parent
    for platform, p in PLATFORMS.items():
        for ib in IB_SPEEDS:
            (here / f"{platform}-ib{ib}.yaml").write_text(render(platform, p, ib))


if __name__ == "__main__":
    main()
