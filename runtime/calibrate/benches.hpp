// zrun calibrate's micro-benchmarks: each fills its part of Measurements on the current GPU / host.
// Times are medians of repeated runs timed with CUDA events (GPU) or steady_clock (host).
#pragma once
#include <nccl.h>

#include <string>
#include <vector>

#include "runtime/calibrate/measurements.hpp"
#include "runtime/calibrate/nvme_samples.hpp"

namespace zrun {
class Communicators;
}

namespace zrun::calibrate {

// GPU name, memory, SMs; the GEMM grid (bf16, fp16, fp32 on cuBLASLt through runtime/model/gemm) and eager
// attention's strided-batched calls (made by runtime/model/attention.cu's attention_gemm_call); zrun's flash attention
// forward and backward (runtime/model/flash_attention.cu) over a grid of shapes in bf16 and fp16;
// memory-bound kernels (norm, softmax/cross-entropy, activations, qwZ quantization, fused Adam, D2D copy);
// launch overhead; pinned and pageable host copies.
void measure_gpu(Measurements& m, bool quick, std::ostream& log);

// One moment of NVMe reads and writes of swap files in nvme_dir (4 KiB .. 1 GiB; .. 256 MiB quick) into `s`.
void sample_nvme(NvmeSamples& s, bool quick, const std::string& nvme_dir, std::ostream& log);

// CPU Adam (kernels/cpu) on every core; a last moment of NVMe reads and writes in nvme_dir, then each size's median
// over every moment of `nvme` into m (none where a moment failed: the profile keeps the base's NVMe figures); host
// memory, cores.
void measure_host(Measurements& m, bool quick, const std::string& nvme_dir, NvmeSamples& nvme, std::ostream& log);

// Every collective kind on every group of `comms` (index into groups), sizes 1 KiB .. 1 GiB (quick: .. 64 MiB).
// Groups on one node go to link class "nvlink", groups of one rank per node to "ib"; mixed groups are
// measured and recorded but not fitted. Every rank calls it; rank 0 records.
void measure_collectives(Measurements& m, Communicators& comms, const std::vector<zsim::ProcessGroup>& groups,
                         int rank, bool quick, std::ostream& log);

// CPU Adam (kernels/cpu) on every rank at once, as a data-parallel step runs its optimizer (on 2+ ranks; every rank
// calls it): 128M parameters per rank (4M quick) on 1, 2, 4, ... threads each up to the hardware threads / ranks,
// each step started together, the slowest rank's step the sample (CpuAdamSample::ranks = ranks), recorded by rank 0.
void measure_cpu_adam_together(Measurements& m, ncclComm_t world, int ranks, int rank, bool quick, std::ostream& log);

// Side-stream kernels (a cudaMemcpyAsync D2D, a copy kernel of many blocks, a one-rank averaging NCCL all-reduce),
// each timed alone and beside a stream of large bf16 GEMMs, into m.beside.
void measure_beside_compute(Measurements& m, bool quick, std::ostream& log);
// On 2+ GPUs (every rank calls it): an all-gather of the world communicator timed alone and beside back-to-back GEMMs
// on every rank, both ways (BesideSample kind "link_collective", recorded by rank 0).
void measure_link_collective_beside_compute(Measurements& m, ncclComm_t world, int ranks, int rank, bool quick,
                                            std::ostream& log);

// The one-rank collectives that move data as zrun's executor calls them on a communicator of this rank alone: an
// all-gather out of place, reduce-scatters and all-reduces averaging in place; 1 KiB .. 1 GiB (quick: .. 64 MiB),
// into m.one_rank. Call on one rank.
void measure_one_rank_collectives(Measurements& m, bool quick, std::ostream& log);

}  // namespace zrun::calibrate
