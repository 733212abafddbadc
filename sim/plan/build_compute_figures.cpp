// The schedule builder's per-unit compute figures: FLOPs, HBM bytes and fused attention per unit and layer.
#include "sim/plan/schedule_builder_state.hpp"
#include "sim/plan/transformers_kernels.hpp"

namespace zsim::build {

// Forward flops: 2 x tokens x matrix params (a GEMM per matrix; a mixture of experts' experts at the share each token
// uses, experts_per_token of experts), the attention core before the output
// projection (eager 4 b s^2 h, causal flash half that: attention_flops.hpp), the head 2 x tokens x h x
// vocab (tied or not). Backward: twice the GEMMs, and the attention core's own backward (flash: 2.5 x its
// forward, the scores recomputed).
Flops Builder::gemm_flops(int u) const {
  const FetchUnit& U = p_.units[u];
  if (U.is_head) return 2.0 * tokens_ * s_.model.hidden * s_.model.vocab;
  if (U.is_embedding) return 0;  // lookup: memory-bound
  const ArchSpec& a = s_.model.arch;
  const double expert_share = a.experts > 0 ? static_cast<double>(a.experts_per_token) / a.experts : 1.0;
  Flops f = 0;
  for (const auto& t : U.tensors)
    if (t.is_matrix()) f += 2.0 * tokens_ * t.numel() * (is_expert_tensor(t.name) ? expert_share : 1.0);
  return f;
}

// Memory-bound units (embedding lookup, norms): read and write one activation each. Backward, the embedding twice
// that; a norm five activations, as a fused norm's backward moves them (zrun's norm.cu, apex's FusedRMSNorm /
// FusedLayerNorm): the dx pass reads x and dy and writes dx, the weight-gradient pass reads x and dy again.
// Eager attention's core adds the traffic of its s x s scores (attention_flops.hpp), the head its loss's.
Bytes Builder::unit_hbm(int u) const {
  const FetchUnit& U = p_.units[u];
  return U.is_embedding || U.vectors_only() ? 2 * tokens_ * s_.model.hidden * e_ : 0;
}

// The MLP's activation kernels (runtime/model/mlp.cu), in units of tokens x ffn_hidden elements of e bytes:
// forward SwiGLU reads gate and up and writes act (3), GeLU reads up and writes act (2); backward the up half
// reads d(act) and gate (GeLU: up) and writes d(up) (3), SwiGLU's gate half reads d(act), gate and up and writes
// d(gate) (4).
Bytes Builder::activation_hbm(int u, bool backward) const {
  const Bytes tf = tokens_ * s_.model.ffn_hidden * e_;
  switch (p_.units[u].activation) {
    case FetchUnit::ActivationPart::up: return (backward ? 3 : s_.model.mlp == MlpKind::gated ? 3 : 2) * tf;
    case FetchUnit::ActivationPart::gate: return backward ? 4 * tf : 0;
    case FetchUnit::ActivationPart::none: return 0;
  }
  return 0;
}

// Under runtime deepspeed, transformers' eager code: each elementwise op and cast a kernel of its own, and the head's
// fp32 loss (transformers_kernels.hpp), in place of zrun's fused norms, activations and loss; the embedding's lookup
// and eager attention's scores as above.
std::optional<PassBytes> Builder::transformers_hbm(int u) const {
  if (s_.runtime != RuntimeKind::deepspeed || p_.units[u].is_embedding) return std::nullopt;
  const std::optional<ModelUnitKind> kind = model_unit_kind(p_.units[u].name);
  if (!kind) return std::nullopt;
  const PassBytes per_token = transformers_unit_bytes_per_token(*kind, s_.model, e_);
  return PassBytes{per_token.forward * tokens_, per_token.backward * tokens_};
}

// Eager attention's scores: transformers' unfused code under runtime deepspeed, zrun's fused softmax otherwise.
AttentionScoresBytes Builder::attention_scores() const {
  return s_.runtime == RuntimeKind::deepspeed ? transformers_eager_scores_bytes(s_.model, s_.training)
                                              : attention_scores_hbm_bytes(s_.model, s_.training);
}

Bytes Builder::forward_hbm(int u) const {
  const Bytes scores = p_.units[u].attention_core ? attention_scores().forward : 0;
  if (const auto t = transformers_hbm(u)) return t->forward + scores;
  return unit_hbm(u) + scores + (p_.units[u].is_head ? logits_bytes() : 0) + activation_hbm(u, false);
}

Bytes Builder::backward_hbm(int u) const {
  const Bytes scores = p_.units[u].attention_core ? attention_scores().backward : 0;
  if (const auto t = transformers_hbm(u)) return t->backward + scores;
  const Bytes own = p_.units[u].vectors_only() ? 5 * unit_hbm(u) / 2 : 2 * unit_hbm(u);
  return own + scores + (p_.units[u].is_head ? 2 * logits_bytes() : 0) + activation_hbm(u, true);
}

Bytes Builder::layer_forward_gemm_hbm(int layer) const {
  Bytes b = 0;
  for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u) b += forward_gemm_hbm(u);
  return b;
}

Flops Builder::layer_forward_fused_attention_flops(int layer) const {
  Flops f = 0;
  for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u) f += forward_fused_attention_flops(u);
  return f;
}

Flops Builder::layer_forward_flops(int layer) const {
  Flops f = 0;
  for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u) f += forward_flops(u);
  return f;
}

Bytes Builder::layer_forward_hbm(int layer) const {
  Bytes b = 0;
  for (int u = p_.layers[layer].first; u <= p_.layers[layer].last; ++u) b += forward_hbm(u);
  return b;
}

// The units after the transformer layers (final norm, head): they share the head's activation buffer.
// Where tensor k of unit u starts in the whole-model flat buffers: DeepSpeed's flat order for stages 1-2
// (round_robin_gradients deals tensors to ranks), model order for stage 0.
Elements Builder::flat_offset(int u, int k) const {
  if (p_.stage != 1 && p_.stage != 2) return layout_.flat[u][k];
  return flat_layout_.offset[first_ordinal_[u] + k];
}

}  // namespace zsim::build
