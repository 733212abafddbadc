// FLOPs of one layer's attention core (scores Q K^T, probabilities times V) per micro-batch, the work
// the schedule charges to the attn.o unit. docs/schedule-semantics.md ("Compute") and docs/timing.md (FLOPS).
#pragma once
#include "sim/common/units.hpp"
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

}  // namespace zsim
