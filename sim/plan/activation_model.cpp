#include "sim/plan/activation_model.hpp"

#include <algorithm>

namespace zsim {

ActivationBytes activation_bytes(const ModelSpec& m, const TrainingSpec& t) {
  const Bytes s = t.seq_len, b = t.micro_batch, h = m.hidden, f = m.ffn_hidden;
  const Bytes a = std::max<std::int64_t>(m.heads, 1);
  const Bytes kv = m.kv_heads > 0 ? m.kv_heads : a;
  const Bytes kv_dim = kv * (h / a);
  const Bytes sbh = s * b * h;
  const Bytes e = bytes_per_element(t.precision);  // 2 in Korthikanti's 16-bit accounting
  const Bytes mask = 1;                             // dropout masks: one byte per element
  const Bytes hidden_mask = m.hidden_dropout > 0 ? mask * sbh : 0;
  // q/k/v input, Q, K, V, out-projection input, the output's dropout mask.
  Bytes attention = e * sbh + e * sbh + 2 * e * s * b * kv_dim + e * sbh + hidden_mask;
  if (m.attention == Attention::eager) {
    // The softmax output (a s^2 b); with attention dropout also its mask and the dropped-out probabilities.
    attention += e * a * s * s * b;
    if (m.attention_dropout > 0) attention += (mask + e) * a * s * s * b;
  } else {
    // FlashAttention keeps Q, K, V, the output (all above) and the fp32 log-sum-exp of each row per head;
    // its dropout mask is regenerated from the RNG state in backward.
    attention += 4 * a * s * b;
  }
  const Bytes mlp = m.mlp == MlpKind::gated ? e * sbh + 4 * e * s * b * f + hidden_mask
                                            : e * sbh + 2 * e * s * b * f + hidden_mask;
  const Bytes norms = 2 * e * sbh;
  ActivationBytes r;
  r.per_layer_no_recompute = attention + mlp + norms;
  r.per_layer_checkpoint = e * sbh;
  // Logits in the training dtype plus their fp32 copy for the softmax cross-entropy.
  r.head_logits = s * b * m.vocab * (bytes_per_element(t.precision) + 4);
  return r;
}

}  // namespace zsim
