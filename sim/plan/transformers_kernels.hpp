// The memory-bound traffic of a Hugging Face transformers 5 causal LM's eager modeling code beyond its GEMMs and its
// attention core, per unit and pass, as PyTorch runs each elementwise op and cast as a kernel of its own (reads +
// writes, bytes) and autograd runs each op's derivative (torch 2.11). zsim's own layers (runtime zrun) fuse these;
// under runtime deepspeed the schedule builder prices them instead (sim/plan/build_compute_figures.cpp). Pure.
//
// Per token, e the training dtype's bytes (bf16: 2), fp32 4; h hidden, kv = kv_heads x head_dim, f ffn_hidden, V vocab
// (docs/deepspeed-time.md derives each from modeling_llama.py / modeling_gpt2.py):
// Llama family (RMSNorm, RoPE, SiLU(gate) x up):
//   norm      forward: to(fp32) e + 4, pow 8, mean 4, x * rsqrt 8, to(e) 4 + e, weight * x 2e = 36 (bf16) x h;
//             backward: weight's mul (dx 2e, dw's product and sum 4e), the casts 2 (4 + e), x * rsqrt (dx 8, d rsqrt's
//             product 12 and sum 4), mean's expand 4, pow's 12, the two fp32 grads' add 12 = 76 x h; attn.norm
//             + 2 x 3e (its output's grad from q, k and v summed), mlp.norm + 3e (gate, up)
//   q, k      RoPE: q * cos 2e, rotate_half's neg and cat 3e, * sin 2e, add 3e = 10e x h (q) / x kv (k), both passes
//   o         the heads merged into a contiguous copy 2e, the residual add 3e; backward the copy 2e and the
//             residual's gradient sum 3e (x h)
//   up        SiLU 2e and its product with up 3e = 5e x f; backward the product's two grads 6e, SiLU's 3e = 9e x f
//   down      the residual add 3e x h; backward the residual's gradient sum 3e x h
// GPT-2 (LayerNorm fused, dropout 0.1 on both residual branches, gelu_new as eight ops):
//   norm      forward 2e, backward 5e x h (the fused kernels)
//   o, down   merged heads' copy (o only) 2e, dropout (mask 1 byte) 2e + 1, residual add 3e; backward the same
//   up        gelu_new: pow, three muls, two adds, tanh, and its product: 18e x f; backward 36e x f
// Both: the head's loss, logits.float() e + 4, log_softmax 8 (forward 14 at bf16 x V); backward nll_loss's zeroed
// gradient 4, log_softmax's 12, the cast back 4 + e (22 x V).
//
// Eager attention's s x s scores (eager_attention_forward of both files), per N = heads x s^2 x b elements, in place of
// the fused softmax zrun runs (attention_flops.hpp attention_scores_hbm_bytes):
//   Llama     forward: Q K^T writes e, `* scaling` 2e, `+ attention_mask` 2e, softmax(dtype=fp32) e + 4, `.to(e)`
//             4 + e, P V reads e = 8e + 8; backward: dP written e, P read for dV e, `.to`'s gradient e + 4,
//             softmax's backward (its fp32 output and the fp32 gradient read, the gradient in e written) 8 + e,
//             `* scaling`'s 2e, dS read for dQ and dK 2e = 8e + 12;
//   GPT-2     the softmax in the training dtype (`.type(value.dtype)` a no-op): forward 8e, backward 9e (softmax's
//             backward reads its output and the gradient and writes e: 3e);
//   either    attention_dropout > 0 adds dropout's kernel, (2e + 1) each way (a 1-byte mask); at 0 torch returns
//             its input (ATen Dropout.cpp), no kernel. The 4-D mask's own read (b x s^2, broadcast over heads) is
//             left out. Of these the GEMMs' operand share is zrun's (2eN forward, 4eN backward).
#pragma once
#include "sim/common/units.hpp"
#include "sim/plan/attention_flops.hpp"
#include "sim/plan/kernel_launches.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct PassBytes {
  Bytes forward = 0;
  Bytes backward = 0;
};

// Per token of one unit; multiply by the micro-batch's tokens.
PassBytes transformers_unit_bytes_per_token(ModelUnitKind kind, const ModelSpec& m, Bytes dtype_bytes);

// One layer's eager attention scores per micro-batch under transformers' code (0 for flash / SDPA).
AttentionScoresBytes transformers_eager_scores_bytes(const ModelSpec& m, const TrainingSpec& t);

}  // namespace zsim
