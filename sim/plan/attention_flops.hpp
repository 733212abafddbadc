// FLOPs of one layer's attention core (scores Q K^T, probabilities times V) per micro-batch, the work
// the schedule charges to the attn.o unit. docs/schedule-semantics.md ("Compute") and docs/timing.md (FLOPS).
#pragma once
#include <vector>

#include "sim/common/units.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct AttentionFlops {
  Flops forward = 0;
  Flops backward = 0;  // flash: includes the recomputation of the scores
};

// eager: the full s x s products, 4 b s^2 h forward, twice that backward (as every GEMM).
// flash: a causal kernel skips the masked half: 2 b s^2 h forward; backward recomputes Q K^T and runs the
// four gradient products, 2.5 x forward (FlashAttention's own accounting,
// Dao-AILab/flash-attention benchmarks/benchmark_flash_attention.py, flops()).
AttentionFlops attention_core_flops(const ModelSpec& m, const TrainingSpec& t);

// HBM traffic (read + write) of the s x s scores in one layer's eager attention core per micro-batch, in
// units of N = heads x s^2 x b elements of e bytes (runtime/model/attention.cu runs these kernels):
//   forward:  the Q K^T GEMM writes the scores (N), the causal softmax reads and writes them in place (2N),
//             the P V GEMM reads the probabilities (N): 4eN;
//   backward: dout V^T writes d(probs) (N), probs^T dout reads the probabilities (N), the softmax backward
//             reads probs and d(probs) and writes d(scores) in place (3N), d(scores) K and d(scores)^T Q read
//             them (2N): 7eN;
//   attention_dropout > 0 adds a dropout kernel: forward reads the probabilities, writes them and a 1-byte
//   mask ((2e + 1)N), backward reads the gradient and the mask and writes the gradient ((2e + 1)N).
// flash keeps no s x s tensor in HBM: 0 (its traffic is q, k, v and the output, inside its FLOP time).
// Of those, the GEMMs' share (they write or read the scores as an operand: forward Q K^T and P V, 2eN; backward
// dout V^T, probs^T dout, d(scores) K, d(scores)^T Q, 4eN), which a GEMM model that prices the core's calls counts
// in its operand traffic (ComputeOp::gemm_hbm_bytes); the rest is the softmax kernels' (2eN, 3eN) and dropout's.
struct AttentionScoresBytes {
  Bytes forward = 0;
  Bytes backward = 0;
  Bytes forward_gemm = 0;
  Bytes backward_gemm = 0;
};
AttentionScoresBytes attention_scores_hbm_bytes(const ModelSpec& m, const TrainingSpec& t);

// The GEMM calls of one layer's eager attention core per micro-batch, as runtime/model/attention.cu issues them: for
// each sequence of the micro-batch and each query head r of a kv group (g = heads / kv_heads of them), one
// strided-batched cuBLASLt call per product over the kv heads (batch kv_heads; d = hidden / heads, s = seq_len):
//   forward   scores S^T = K Q^T (m = n = s, k = d), out^T = V^T P^T (m = d, n = s, k = s);
//   backward  dP^T = V dO^T (s, s, d), dV^T = dO^T P (d, s, s), dQ^T = K^T dS^T (d, s, s), dK^T = Q^T dS (d, s, s);
// each b x g calls. Their FLOPs are attention_core_flops (eager). Flash: none (one fused kernel).
struct AttentionGemmCalls {
  std::vector<GemmCalls> forward, backward;
};
AttentionGemmCalls attention_core_gemm_calls(const ModelSpec& m, const TrainingSpec& t);

}  // namespace zsim
