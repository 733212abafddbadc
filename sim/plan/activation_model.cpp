#include "sim/plan/activation_model.hpp"

#include "sim/plan/transformers_activations.hpp"

#include <algorithm>

namespace zsim {

ActivationBytes activation_bytes(const ModelSpec& m, const TrainingSpec& t) {
  const Bytes s = t.seq_len, b = t.micro_batch, h = m.hidden, f = m.ffn_hidden;
  const Bytes a = std::max<std::int64_t>(m.heads, 1);
  const Bytes kv = m.kv_heads > 0 ? m.kv_heads : a;
  const Bytes kv_dim = kv * head_dim(m);
  const Bytes sbh = s * b * h;
  const Bytes e = bytes_per_element(t.precision);  // 2 in Korthikanti's 16-bit accounting
  const Bytes mask = 1;                             // dropout masks: one byte per element
  const Bytes fp32 = 4;
  const Bytes hidden_mask = m.hidden_dropout > 0 ? mask * sbh : 0;
  const bool eager = m.attention == Attention::eager;
  // q/k/v input, Q, K, V, out-projection input, the output's dropout mask.
  Bytes attention = e * sbh + e * sbh + 2 * e * s * b * kv_dim + e * sbh + hidden_mask;
  if (eager) {
    // The softmax output (a s^2 b); with attention dropout also its mask and the dropped-out probabilities.
    attention += e * a * s * s * b;
    if (m.attention_dropout > 0) attention += (mask + e) * a * s * s * b;
  } else {
    // FlashAttention keeps Q, K, V, the output (all above) and the fp32 log-sum-exp of each row per head;
    // its dropout mask is regenerated from the RNG state in backward.
    attention += fp32 * a * s * b;
  }
  const Bytes mlp = m.mlp == MlpKind::gated ? e * sbh + 4 * e * s * b * f + hidden_mask
                                            : e * sbh + 2 * e * s * b * f + hidden_mask;
  // A norm keeps its input and, per token, its fp32 mean and rstd (LayerNorm's saved statistics).
  const Bytes norm_stats = 2 * fp32 * s * b;
  const Bytes norms = 2 * (e * sbh + norm_stats);
  ActivationBytes r;
  r.per_layer_no_recompute = attention + mlp + norms;
  r.per_layer_checkpoint = e * sbh;
  r.per_layer_work_bytes = r.per_layer_no_recompute - r.per_layer_checkpoint;
  r.per_layer_forward_work_bytes = r.per_layer_work_bytes;
  // The backward's activation gradients: the residual stream's, a norm output's, the attention output's, dQ, dK,
  // dV, two f-wide ones for the MLP; eager: d(probs) (d(scores) in place); flash: delta and the fp32 dQ sum.
  Bytes grads = 4 * e * sbh + 2 * e * s * b * kv_dim + 2 * e * s * b * f;
  grads += eager ? e * a * s * s * b : fp32 * a * s * b + fp32 * sbh;
  r.backward_grad_bytes = grads;
  // The final norm's input (the last layer's output) and output, its statistics; the logits in the training dtype
  // plus their fp32 copy for the softmax cross-entropy.
  r.head_bytes = 2 * e * sbh + norm_stats + s * b * m.vocab * (e + fp32);
  return r;
}

ActivationBytes activation_bytes(const ModelSpec& m, const TrainingSpec& t, RuntimeKind runtime) {
  if (runtime == RuntimeKind::zrun) return activation_bytes(m, t);
  const TransformersActivations x = transformers_activations(m, t);
  const Bytes incoming_grad = bytes_per_element(t.precision) * t.micro_batch * t.seq_len * m.hidden;
  ActivationBytes r;
  r.per_layer_no_recompute = x.layer_saved.total;
  r.per_layer_checkpoint = x.layer_checkpoint_kept.total;
  r.per_layer_work_bytes = x.layer_recompute.total;
  r.per_layer_forward_work_bytes = x.layer_forward_transient.total;
  r.per_layer_forward_transient = x.layer_forward_transient.total;
  r.backward_grad_bytes = incoming_grad + x.layer_backward_transient.total;
  r.head_bytes = x.head_saved.total;
  const bool ckpt = t.activation_checkpointing == Checkpointing::full;
  r.shared_bytes = x.shared_saved.total + x.embedding_saved.total +
                   (ckpt ? x.checkpoint_shared.total : x.sliding_masks_saved.total);
  r.head_forward_transient = x.logits_output.total + x.head_forward_transient.total;
  r.loss_backward_transient = x.loss_backward_transient.total;
  return r;
}

}  // namespace zsim
