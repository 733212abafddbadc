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
  // A module is a matrix plus the bias vector that follows it (named "<matrix>.bias").
  Elements best = 0;
  for (const ModuleShapes* m : {&embedding, &layer, &head}) {
    for (size_t i = 0; i < m->tensors.size(); ++i) {
      const TensorShape& t = m->tensors[i];
      Elements n = t.numel();
      if (t.is_matrix() && i + 1 < m->tensors.size() && m->tensors[i + 1].name == t.name + ".bias")
        n += m->tensors[i + 1].numel();
      best = std::max(best, n);
    }
  }
  return best;
}

namespace {
void linear(ModuleShapes& m, const std::string& name, std::int64_t in, std::int64_t out, bool bias) {
  m.tensors.push_back({name, in, out});
  if (bias) m.tensors.push_back({name + ".bias", out, 0});
}
void norm(ModuleShapes& m, const std::string& name, std::int64_t h, bool bias) {
  m.tensors.push_back({name + ".weight", h, 0});
  if (bias) m.tensors.push_back({name + ".bias", h, 0});
}
}  // namespace

ModelShapes model_shapes(const ModelSpec& m) {
  ModelShapes s;
  s.layers = m.layers;
  s.vocab = m.vocab;
  s.hidden = m.hidden;
  s.tied_head = m.tie_word_embeddings;
  const std::int64_t h = m.hidden;
  const std::int64_t heads = std::max<std::int64_t>(m.heads, 1);
  const std::int64_t kv = m.kv_heads > 0 ? m.kv_heads : heads;
  const std::int64_t head_dim = h / heads;
  const std::int64_t kv_dim = kv * head_dim;

  s.embedding.name = "embedding";
  s.embedding.tensors.push_back({"embed.tokens", m.vocab, h});
  if (m.max_position_embeddings > 0) s.embedding.tensors.push_back({"embed.positions", m.max_position_embeddings, h});

  ModuleShapes& L = s.layer;
  L.name = "layer";
  norm(L, "attn.norm", h, m.bias);
  linear(L, "attn.q", h, h, m.bias);
  linear(L, "attn.k", h, kv_dim, m.bias);
  linear(L, "attn.v", h, kv_dim, m.bias);
  linear(L, "attn.o", h, h, m.bias);
  norm(L, "mlp.norm", h, m.bias);
  if (m.mlp == MlpKind::gated) {
    linear(L, "mlp.gate", h, m.ffn_hidden, m.bias);
    linear(L, "mlp.up", h, m.ffn_hidden, m.bias);
  } else {
    linear(L, "mlp.up", h, m.ffn_hidden, m.bias);
  }
  linear(L, "mlp.down", m.ffn_hidden, h, m.bias);

  s.head.name = "head";
  norm(s.head, "final.norm", h, m.bias);
  if (!m.tie_word_embeddings) s.head.tensors.push_back({"head.out", h, m.vocab});
  return s;
}

}  // namespace zsim
