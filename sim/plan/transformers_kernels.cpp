#include "sim/plan/transformers_kernels.hpp"

namespace zsim {

namespace {

PassBytes llama(ModelUnitKind kind, const ModelSpec& m, Bytes e) {
  const Bytes h = m.hidden, f = m.ffn_hidden, kv = m.kv_heads * head_dim(m);
  // to(fp32), pow, mean, x * rsqrt, to(e), weight * x (the comment in the header).
  const Bytes norm_fwd = (e + 4) + 8 + 4 + 8 + (4 + e) + 2 * e;
  // weight * x (dx, then dw's product and sum), the two casts, x * rsqrt (dx; d rsqrt's product and sum), mean's
  // expand, pow's, the two fp32 gradients' add.
  const Bytes norm_bwd = 6 * e + 2 * (4 + e) + 8 + 12 + 4 + 4 + 12 + 12;
  switch (kind) {
    case ModelUnitKind::attn_norm: return {norm_fwd * h, (norm_bwd + 2 * 3 * e) * h};
    case ModelUnitKind::mlp_norm: return {norm_fwd * h, (norm_bwd + 3 * e) * h};
    case ModelUnitKind::final_norm: return {norm_fwd * h, norm_bwd * h};
    case ModelUnitKind::attn_q: return {10 * e * h, 10 * e * h};
    case ModelUnitKind::attn_k: return {10 * e * kv, 10 * e * kv};
    case ModelUnitKind::attn_o: return {5 * e * h, 5 * e * h};
    case ModelUnitKind::mlp_up: return {5 * e * f, 9 * e * f};
    case ModelUnitKind::mlp_down: return {3 * e * h, 3 * e * h};
    default: return {};
  }
}

PassBytes gpt2(ModelUnitKind kind, const ModelSpec& m, Bytes e) {
  const Bytes h = m.hidden, f = m.ffn_hidden;
  const Bytes dropout = 2 * e + 1, residual = 3 * e;
  switch (kind) {
    case ModelUnitKind::attn_norm:
    case ModelUnitKind::mlp_norm:
    case ModelUnitKind::final_norm: return {2 * e * h, 5 * e * h};
    case ModelUnitKind::attn_o: return {(2 * e + dropout + residual) * h, (2 * e + dropout + residual) * h};
    case ModelUnitKind::mlp_up: return {18 * e * f, 36 * e * f};
    case ModelUnitKind::mlp_down: return {(dropout + residual) * h, (dropout + residual) * h};
    default: return {};
  }
}

}  // namespace

AttentionScoresBytes transformers_eager_scores_bytes(const ModelSpec& m, const TrainingSpec& t) {
  if (m.attention != Attention::eager) return {};
  const Bytes e = bytes_per_element(t.precision);
  const Bytes n = m.heads * t.seq_len * t.seq_len * t.micro_batch;
  const bool llama_family = m.mlp == MlpKind::gated;
  const Bytes dropout = m.attention_dropout > 0 ? 2 * e + 1 : 0;
  const Bytes forward = (llama_family ? 8 * e + 8 : 8 * e) + dropout;
  const Bytes backward = (llama_family ? 8 * e + 12 : 9 * e) + dropout;
  return {forward * n, backward * n, 2 * e * n, 4 * e * n};
}

PassBytes transformers_unit_bytes_per_token(ModelUnitKind kind, const ModelSpec& m, Bytes e) {
  if (kind == ModelUnitKind::head) return {(e + 4 + 8) * m.vocab, (4 + 12 + 4 + e) * m.vocab};
  return m.mlp == MlpKind::gated ? llama(kind, m, e) : gpt2(kind, m, e);
}

}  // namespace zsim
