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
  // q/k/v input, Q, K, V, out-projection input, dropout mask; softmax output, its dropout mask and
  // the dropped-out probabilities (a s^2 b each).
  const Bytes attention = e * sbh + e * sbh + 2 * e * s * b * kv_dim + e * sbh + mask * sbh +
                          (2 * e + mask) * a * s * s * b;
  const Bytes mlp = m.mlp == MlpKind::gated ? e * sbh + 4 * e * s * b * f + mask * sbh
                                            : e * sbh + 2 * e * s * b * f + mask * sbh;
  const Bytes norms = 2 * e * sbh;
  ActivationBytes r;
  r.per_layer_no_recompute = attention + mlp + norms;
  r.per_layer_checkpoint = e * sbh;
  // Logits in the training dtype plus their fp32 copy for the softmax cross-entropy.
  r.head_logits = s * b * m.vocab * (bytes_per_element(t.precision) + 4);
  return r;
}

}  // namespace zsim
