// A measured model of one GEMM's time as a function of its shape (zrun calibrate fits it on cuBLASLt; docs/
// hardware-profiles.md "GEMM model"): a fixed per-call cost, the FLOPs at a peak fraction reduced by wave
// quantization, and the operand traffic at an achieved bandwidth, the smaller of the two partly hidden under the
// larger:
//   t(m, n, k) = launch_s + C + I - io_overlap x min(C, I)
//   C = 2mnk / (peak x max_efficiency x wave(m, n, k)),   I = bytes (mk + kn + mn) / io_GBps
//   wave(m, n, k) = units / (ceil(units / sms) x sms), units = tiles x splits,
//   tiles = ceil(m / tile_m) x ceil(n / tile_n), splits = clamp(floor(sms / tiles), 1, max(1, floor(k / split_k_depth)))
// (split-K: a GEMM of few tiles and a long k runs k in slices on otherwise idle SMs, as cuBLASLt does)
// (D[m x n] = A[m x k] B[k x n]). A data-sheet profile has no model (max_efficiency 0): zsim then uses the
// constant efficiency.gemm.
#pragma once
#include <cstdint>

namespace zsim {

struct GemmModel {
  double launch_us = 0;         // fixed cost per GEMM call (launch, prologue, epilogue)
  double max_efficiency = 0;    // achieved / peak FLOP/s of a large GEMM with full waves; 0 = no model
  double io_GBps = 0;           // operand bandwidth of the (mk + kn + mn) term; 0 = no such term
  std::int64_t tile_m = 128;    // output tile the wave count assumes
  std::int64_t tile_n = 128;
  std::int64_t sms = 132;       // streaming multiprocessors (one tile each per wave)
  std::int64_t split_k_depth = 0;  // split-K: a GEMM with fewer tiles than SMs splits k into chunks of at least
                                   // this many (up to filling the SMs); 0 = no split-K
  double io_overlap = 0;        // fraction of min(FLOP time, traffic time) hidden under the other; 0 = they add
  // The fit saw eager attention's strided-batched calls (k = head dim, batch = kv heads; zrun calibrate's
  // attention-shaped GEMMs), so the model holds for them: only then does zsim price eager attention's core as
  // those calls (sim/engine/op_work.cpp); without, it keeps running the core at its unit's GEMM efficiency.
  bool attention_shapes = false;
  bool present() const { return max_efficiency > 0; }
};

// Fraction of the waves' SM slots that hold work units (tiles x split-K slices) for `batch` GEMMs: 1 when the
// units fill whole waves.
double wave_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, const GemmModel& g, std::int64_t batch = 1);

// Seconds of one GEMM (batch: independent GEMMs of the same shape in one call, e.g. attention's per-head
// products). bytes_per_element: 2 for bf16/fp16, 4 for fp32. peak_tflops: the precision's peak.
double gemm_model_s(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, int bytes_per_element,
                    double peak_tflops, const GemmModel& g);

}  // namespace zsim

#include <vector>

namespace zsim {

// GEMM calls of a unit's work: D[m x n] = A[m x k] B[k x n], `batch` of them in one call, `calls` such calls.
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0, batch = 1, calls = 1;
};

// The FLOPs of one call of the shape: 2 m n k for each of its `batch` products.
double gemm_call_flops(const GemmShape& g);

// Whether every dimension of the GEMM is a multiple of 16 bytes' elements (8 at 16-bit, 4 at fp32): cuBLAS's
// vectorized tensor-core kernels need 16-byte aligned rows, and a row of D, A or B is n, k, m or its transpose
// long. One that is not runs on narrow-load kernels (torch 2.11 on an H200 picks cutlass_75 *_align1 ones for a
// 50,257-wide GPT-2 head: validate/deepspeed/probes/probe_vocab_alignment.py).
bool gemm_aligned(const GemmShape& g, int bytes_per_element);

// The efficiency the model gives a set of GEMMs run one after another: their FLOPs over peak x their modelled
// time (launches and wave losses included). zsim times an op's FLOPs at this efficiency. Empty set: 0.
double gemm_model_efficiency(const std::vector<GemmShape>& gemms, int bytes_per_element, double peak_tflops,
                             const GemmModel& g);

}  // namespace zsim
