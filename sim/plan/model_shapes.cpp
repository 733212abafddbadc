#include "sim/plan/model_shapes.hpp"

#include <algorithm>

namespace zsim {

Elements ModuleShapes::params() const {
  Elements n = 0;
  for (const auto& t : tensors) n += t.numel();
  return n;
}

Elements ModuleShapes::matrix_params() const {
  Elements n = 0;
  for (const auto& t : tensors)
    if (t.is_matrix()) n += t.numel();
  return n;
}

Elements ModelShapes::total_params() const {
  return embedding.params() + layers * layer.params() + head.params();
}

Elements ModelShapes::largest_layer_params() const {
  return std::max({embedding.params(), layer.params(), head.params()});
}

Elements ModelShapes::largest_module_params() const {
  // A module: its consecutive tensors of one module name (a matrix and its bias; the experts' two 3-D parameters).
  Elements best = 0;
  for (const ModuleShapes* m : {&embedding, &layer, &head}) {
    for (size_t i = 0; i < m->tensors.size();) {
      const std::string mod = module_name(m->tensors[i].name);
      Elements n = 0;
      for (; i < m->tensors.size() && module_name(m->tensors[i].name) == mod; ++i) n += m->tensors[i].numel();
      best = std::max(best, n);
    }
  }
  return best;
}

Elements ModelShapes::active_params(std::int64_t experts, std::int64_t experts_per_token) const {
  if (experts <= 0) return total_params();
  Elements idle = 0;
  for (const auto& t : layer.tensors)
    if (is_expert_tensor(t.name)) idle += t.numel() - t.numel() / experts * experts_per_token;
  return total_params() - layers * idle;
}

std::string module_name(const std::string& tensor) {
  for (const char* block : {"mlp.moe.", "mlp.experts."})
    if (tensor.rfind(block, 0) == 0) return std::string(block, std::char_traits<char>::length(block) - 1);
  for (const char* suffix : {".weight", ".bias"}) {
    const std::string sfx = suffix;
    if (tensor.size() > sfx.size() && tensor.compare(tensor.size() - sfx.size(), sfx.size(), sfx) == 0)
      return tensor.substr(0, tensor.size() - sfx.size());
  }
  return tensor;
}

bool is_expert_tensor(const std::string& tensor) {
  return tensor.ends_with(".gate_up_proj") || tensor.ends_with(".down_proj");
}

namespace {
void linear(ModuleShapes& m, const std::string& name, std::int64_t in, std::int64_t out, bool bias) {
  m.tensors.push_back({name, in, out});
  if (bias) m.tensors.push_back({name + ".bias", out, 0});
}
void norm(ModuleShapes& m, const std::string& name, std::int64_t width, NormKind kind) {
  m.tensors.push_back({name + ".weight", width, 0});
  if (kind == NormKind::layer) m.tensors.push_back({name + ".bias", width, 0});
}

// The attention block's modules in the order the forward calls them: q, k, v (or one fused qkv), q/k norms where the
// family has them (Qwen3 after each projection; Gemma-3 after all three; OLMo-2's over the full width after each),
// then o (the attention core runs in o's unit).
void attention(ModuleShapes& L, const ModelSpec& m, const ArchSpec& a) {
  const std::int64_t h = m.hidden, d = head_dim(m);
  const std::int64_t q = std::max<std::int64_t>(m.heads, 1) * d;
  const std::int64_t kv = (m.kv_heads > 0 ? m.kv_heads : m.heads) * d;
  const bool gemma3 = a.qk_norm == QkNorm::per_head && a.norm == NormKind::rms_gemma;
  const std::int64_t q_norm = a.qk_norm == QkNorm::full_width ? q : d, k_norm = a.qk_norm == QkNorm::full_width ? kv : d;
  if (a.fused_qkv) {
    linear(L, "attn.qkv", h, q + 2 * kv, a.qkv_bias);
  } else {
    linear(L, "attn.q", h, q, a.qkv_bias);
    if (a.qk_norm != QkNorm::none && !gemma3) norm(L, "attn.q_norm", q_norm, NormKind::rms);
    linear(L, "attn.k", h, kv, a.qkv_bias);
    if (a.qk_norm != QkNorm::none && !gemma3) norm(L, "attn.k_norm", k_norm, NormKind::rms);
    linear(L, "attn.v", h, kv, a.qkv_bias);
    if (gemma3) {
      norm(L, "attn.q_norm", d, NormKind::rms_gemma);
      norm(L, "attn.k_norm", d, NormKind::rms_gemma);
    }
  }
  linear(L, "attn.o", q, h, a.o_bias);
}

// A mixture of experts' MLP as transformers 5.17 declares it: the router's weight (experts x hidden, no bias) and the
// experts' two 3-D parameters of one module (gate_up_proj [E, 2F, h], down_proj [E, h, F]); with the block a stage-3
// leaf module (set_z3_leaf_modules) all three are one module's ("mlp.moe").
void moe_mlp(ModuleShapes& L, const ModelSpec& m, const ArchSpec& a) {
  const std::int64_t h = m.hidden, f = a.expert_ffn, e = a.experts;
  const std::string block = moe_block_is_leaf(m) ? "mlp.moe." : "mlp.experts.";
  L.tensors.push_back({moe_block_is_leaf(m) ? "mlp.moe.router" : "mlp.router", h, e});
  L.tensors.push_back({block + "gate_up_proj", h, e * 2 * f});
  L.tensors.push_back({block + "down_proj", e * f, h});
}

void mlp(ModuleShapes& L, const ModelSpec& m, const ArchSpec& a) {
  const std::int64_t h = m.hidden, f = m.ffn_hidden;
  if (a.experts > 0) {
    moe_mlp(L, m, a);
    return;
  }
  if (m.mlp == MlpKind::gated && a.fused_gate_up) {
    linear(L, "mlp.gate_up", h, 2 * f, a.mlp_bias);
  } else if (m.mlp == MlpKind::gated) {
    linear(L, "mlp.gate", h, f, a.mlp_bias);
    linear(L, "mlp.up", h, f, a.mlp_bias);
  } else {
    linear(L, "mlp.up", h, f, a.mlp_bias);
  }
  linear(L, "mlp.down", f, h, a.mlp_bias);
}

// One decoder layer, its norms where the family's block puts them.
void decoder_layer(ModuleShapes& L, const ModelSpec& m, const ArchSpec& a) {
  const std::int64_t h = m.hidden;
  const NormKind nk = a.norm;
  switch (a.block) {
    case BlockKind::pre_norm:
    case BlockKind::parallel:
      norm(L, "attn.norm", h, nk);
      attention(L, m, a);
      norm(L, "mlp.norm", h, nk);
      mlp(L, m, a);
      break;
    case BlockKind::parallel_shared_norm:
      norm(L, "attn.norm", h, nk);
      attention(L, m, a);
      mlp(L, m, a);
      break;
    case BlockKind::sandwich:
      norm(L, "attn.norm", h, nk);
      attention(L, m, a);
      norm(L, "attn.post_norm", h, nk);
      norm(L, "mlp.norm", h, nk);
      mlp(L, m, a);
      norm(L, "mlp.post_norm", h, nk);
      break;
    case BlockKind::post_norm:
      attention(L, m, a);
      norm(L, "attn.post_norm", h, nk);
      mlp(L, m, a);
      norm(L, "mlp.post_norm", h, nk);
      break;
  }
}
}  // namespace

ModelShapes model_shapes(const ModelSpec& m) {
  ModelShapes s;
  s.layers = m.layers;
  s.vocab = m.vocab;
  s.hidden = m.hidden;
  s.tied_head = m.tie_word_embeddings;
  const std::int64_t h = m.hidden;
  const ArchSpec a = architecture(m);

  s.embedding.name = "embedding";
  s.embedding.tensors.push_back({"embed.tokens", m.vocab, h});
  if (m.max_position_embeddings > 0)
    s.embedding.tensors.push_back({"embed.positions", m.max_position_embeddings + a.position_offset, h});

  s.layer.name = "layer";
  decoder_layer(s.layer, m, a);

  s.head.name = "head";
  norm(s.head, "final.norm", h, a.norm);
  if (!m.tie_word_embeddings) s.head.tensors.push_back({"head.out", h, m.vocab});
  return s;
}

}  // namespace zsim
