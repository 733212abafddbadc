// Where the model keeps its activations inside the caller's buffers: byte offsets of every tensor a layer
// saves for its backward, of the head's tensors, and of the activation gradients backward works in. The
// caller (zrun's arena) owns all of it; this says how many bytes each buffer needs, so zrun can set them
// beside zsim's ActivationBytes per buffer.
#pragma once
#include <cstdint>

#include "runtime/model/model_config.hpp"
#include "sim/plan/activation_model.hpp"

namespace zrun::model {

// Byte offsets inside one layer's activations. x_in is the layer input (the residual stream); it is the
// only tensor a checkpointed layer keeps. The rest is the layer's working set: in the layer's own buffer
// without checkpointing, in the shared recompute buffer (Activations::work) with it, at the same offsets
// minus work_base.
struct LayerLayout {
  std::int64_t x_in = 0;      // [T, h]
  std::int64_t work_base = 0; // start of the working set
  std::int64_t n1 = 0;        // attn.norm output [T, h]
  std::int64_t stats1 = 0;    // attn.norm mean, rstd: fp32 [2, T]
  std::int64_t q = 0;         // [T, h]
  std::int64_t k = 0;         // [T, kv_dim]
  std::int64_t v = 0;         // [T, kv_dim]
  std::int64_t probs = 0;     // eager: causal softmax of the scores, materialised: [b, heads, s, s]
  std::int64_t lse = 0;       // flash: fp32 [b, heads, s], log-sum-exp of each row of scores (no s x s tensor)
  std::int64_t attn = 0;      // attention output, input of attn.o [T, h]
  std::int64_t x_mid = 0;     // x_in + attn.o(attn) [T, h]
  std::int64_t n2 = 0;        // mlp.norm output [T, h]
  std::int64_t stats2 = 0;    // fp32 [2, T]
  std::int64_t gate = 0;      // gated: gate projection [T, f] (plain: unused)
  std::int64_t up = 0;        // up projection [T, f] (plain: GeLU input)
  std::int64_t act = 0;       // silu(gate) * up, or gelu(up): input of mlp.down [T, f]
  std::int64_t end = 0;       // bytes of a layer without checkpointing
};

// The head's activations: the last layer's output, the final norm, logits, and the loss.
struct HeadLayout {
  std::int64_t x_final = 0;   // [T, h]
  std::int64_t nf = 0;        // final.norm output [T, h]
  std::int64_t statsf = 0;    // fp32 [2, T]
  std::int64_t logits = 0;    // [T, vocab] in the training dtype; backward turns it into d(logits) in place
  std::int64_t lse = 0;       // fp32 [T]: log-sum-exp of each row
  std::int64_t token_loss = 0;// fp32 [T]
  std::int64_t loss = 0;      // fp32 [1]: mean cross-entropy over the micro-batch's tokens
  std::int64_t end = 0;
};

// Activation gradients during backward (one buffer, reused by every layer).
struct GradLayout {
  std::int64_t dres = 0;      // gradient of the residual stream [T, h]
  std::int64_t dn = 0;        // gradient of a norm output [T, h]
  std::int64_t dattn = 0;     // gradient of the attention output [T, h]
  std::int64_t dq = 0;        // [T, h]
  std::int64_t dk = 0;        // [T, kv_dim]
  std::int64_t dv = 0;        // [T, kv_dim]
  std::int64_t dprobs = 0;    // eager: [b, heads, s, s]: d(probs), then d(scores) in place
  std::int64_t delta = 0;     // flash: fp32 [b, heads, s], rowsum(d(out) * out)
  std::int64_t dq_accum = 0;  // flash: fp32 [T, h], dq summed over key blocks before rounding to the dtype
  std::int64_t dact = 0;      // [T, f]
  std::int64_t dtmp = 0;      // [T, f]: d(up), d(gate) or d(gelu input)
  std::int64_t end = 0;
};

struct ActivationLayout {
  LayerLayout layer;
  HeadLayout head;
  GradLayout grad;

  std::int64_t layer_bytes(bool checkpointing) const;  // what one layer keeps between forward and backward
  std::int64_t work_bytes() const;                     // checkpointing: the recompute working set
  std::int64_t head_bytes() const { return head.end; }
  std::int64_t grad_bytes() const { return grad.end; }
};

ActivationLayout activation_layout(const ModelConfig& c);

// zrun's bytes for each buffer zsim predicts (sim/plan/activation_model.hpp), to set beside the prediction:
// per_layer_no_recompute = a layer's buffer without checkpointing, per_layer_checkpoint = with it (its
// input), per_layer_work_bytes = the working set (recompute, and the forward's under checkpointing),
// backward_grad_bytes = the backward's activation gradients, head_bytes = the head's buffer (last layer's output,
// final norm output and statistics, logits, the loss's fp32 row values: log-sum-exp, per-token loss, the mean).
zsim::ActivationBytes zsim_buffer_bytes(const ActivationLayout& a);

}  // namespace zrun::model
