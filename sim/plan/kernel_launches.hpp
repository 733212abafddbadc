// How many kernels a forward, backward or recompute op launches on the GPU, counted as zrun's model runs the
// unit (runtime/model/model.cpp and the kernel files beside it). zsim charges each launch a fixed cost
// (efficiency.launch_us, docs/timing.md "Compute"), so that an op of several small kernels is not priced as its
// FLOPs and bytes alone. A pure function of the unit's kind, the model's shape, the micro-batch and the
// attention kind; the schedule builder writes it into the op (ComputeOp::kernel_launches).
#pragma once
#include <optional>
#include <string_view>

#include "sim/scenario/scenario.hpp"

namespace zsim {

// The plan's units (Plan::units names: "embedding", "L<l>.attn.norm", "L<l>.attn.{q,k,v,o}", "L<l>.mlp.norm",
// "L<l>.mlp.{gate,up,down}", "final.norm", "head").
enum class ModelUnitKind {
  embedding, attn_norm, attn_q, attn_k, attn_v, attn_o, mlp_norm, mlp_gate, mlp_up, mlp_down, final_norm, head
};
// The kind of a unit by its name; nullopt for a name that is none of the above.
std::optional<ModelUnitKind> model_unit_kind(std::string_view unit_name);

// Launches of one unit (every cuBLASLt GEMM call, kernel and cudaMemsetAsync / device-to-device copy on the op's
// stream counts one):
//   forward   the unit's forward op (fwd.<unit>);
//   backward  its backward (bwd.<unit>; a backward cut into parts launches them all in its first part);
//   recompute its share of its layer's recompute op (recompute.L<l>).
// Per unit, with b = micro_batch, g = heads / kv_heads (zrun's eager attention calls one strided-batched GEMM per
// micro-batch sequence and query head of a kv group) and B = 1 with biases (bias: LayerNorm and biased linears):
//   embedding   forward 1 (gather); backward iota + the token sort (CUB radix sort: 1 single-tile kernel up to
//               4864 tokens, else 12: 2 memsets, histogram, exclusive sum, 4 x (memset + onesweep pass)) + the
//               per-row sums + 1 with learned positions
//   norms       forward 1; backward 3 + B (dx, weight partials, their sum; the bias's sum)
//   q, k, v, gate, down   forward 1 GEMM (bias in its epilogue); backward 2 GEMMs + 2B (bias: column partials
//               and their sum); down is not recomputed (its output is the next layer's kept input)
//   up          forward 1 GEMM + the activation (SwiGLU or GeLU); backward + 1 (the activation's backward);
//               gate's backward also + 1 (SwiGLU's gate half)
//   o           as a linear, plus the attention core: eager forward 2bg GEMMs + the causal softmax, backward 4bg
//               GEMMs + the softmax backward; flash forward 1, backward 4 (dq accumulator memset, delta, the
//               kernel, dq conversion)
//   head        forward 1 GEMM + the cross-entropy (rows, mean) + zrun's copy of the loss; backward the
//               cross-entropy backward + 2 GEMMs
// Executor-side launches that depend on the schedule rather than the unit (zeroing a buffer at its alloc,
// gradient temporaries of a backward cut into parts) are not counted.
// zrun's flash attention core (runtime/model/flash_attention.cu): forward the one kernel; backward the dq accumulator's
// memset, the delta kernel, the kernel and the dq conversion. zrun calibrate's fit of efficiency.flash_attention
// charges its measurements as many launches (runtime/calibrate/fit.hpp).
inline constexpr int kFlashForwardLaunches = 1;
inline constexpr int kFlashBackwardLaunches = 4;
struct UnitKernelLaunches {
  int forward = 0;
  int backward = 0;
  int recompute = 0;
};
UnitKernelLaunches unit_kernel_launches(ModelUnitKind kind, const ModelSpec& m, const TrainingSpec& t);

// The tokens up to which CUB sorts in one single-tile kernel (SingleTilePolicy 256 threads x 19 items, CUDA 13.0).
inline constexpr std::int64_t kCubSingleTileItems = 256 * 19;

}  // namespace zsim
