// Scenarios built in code for the plan tests (the YAML parser is not needed here). Model dimensions
// are the published ones (Llama 2 paper / HF configs, GPT-3 paper table 2.1).
#pragma once
#include "sim/scenario/scenario.hpp"

namespace zsim::test {

inline ModelSpec llama2_7b() {
  ModelSpec m;
  m.name = "llama2-7b";
  m.layers = 32, m.hidden = 4096, m.ffn_hidden = 11008, m.heads = 32, m.kv_heads = 32, m.vocab = 32000;
  m.mlp = MlpKind::gated;
  return m;
}
inline ModelSpec llama2_70b() {
  ModelSpec m;
  m.name = "llama2-70b";
  m.layers = 80, m.hidden = 8192, m.ffn_hidden = 28672, m.heads = 64, m.kv_heads = 8, m.vocab = 32000;
  m.mlp = MlpKind::gated;
  return m;
}
inline ModelSpec llama3_8b() {
  ModelSpec m;
  m.name = "llama3-8b";
  m.layers = 32, m.hidden = 4096, m.ffn_hidden = 14336, m.heads = 32, m.kv_heads = 8, m.vocab = 128256;
  m.mlp = MlpKind::gated;
  return m;
}
inline ModelSpec gpt3_175b() {
  ModelSpec m;
  m.name = "gpt3-175b";
  m.layers = 96, m.hidden = 12288, m.ffn_hidden = 4 * 12288, m.heads = 96, m.kv_heads = 96, m.vocab = 50257;
  m.max_position_embeddings = 2048;
  m.tie_word_embeddings = true;
  m.mlp = MlpKind::plain;
  m.bias = true;
  return m;
}
inline ModelSpec gpt2_1_5b() {
  ModelSpec m;
  m.name = "gpt2-1.5b";
  m.layers = 48, m.hidden = 1600, m.ffn_hidden = 6400, m.heads = 25, m.kv_heads = 25, m.vocab = 50257;
  m.max_position_embeddings = 1024;
  m.tie_word_embeddings = true;
  m.mlp = MlpKind::plain;
  m.bias = true;
  return m;
}

// A small Llama-shaped model whose every tensor divides evenly by 2 * 64 ranks.
inline ModelSpec small_llama(int layers = 4) {
  ModelSpec m;
  m.name = "small";
  m.layers = layers, m.hidden = 512, m.ffn_hidden = 1024, m.heads = 8, m.kv_heads = 8, m.vocab = 1024;
  m.mlp = MlpKind::gated;
  return m;
}

inline Scenario scenario(ModelSpec m, int stage, int nodes, int gpus_per_node) {
  Scenario s;
  s.model = std::move(m);
  s.training.micro_batch = 1;
  s.training.seq_len = 1024;
  s.training.grad_accum = 1;
  s.cluster.nodes = nodes;
  s.cluster.gpus_per_node = gpus_per_node;
  s.zero.stage = stage;
  s.zero.overlap_comm = stage == 3;
  s.zero.stage3_param_persistence_threshold = 0;
  return s;
}

}  // namespace zsim::test
