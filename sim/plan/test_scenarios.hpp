// Scenarios built in code for the plan tests (the YAML parser is not needed here); published model
// shapes come from the presets.
#pragma once
#include <stdexcept>
#include <string>

#include "sim/scenario/presets.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim::test {

// The published shapes are the presets' (sim/scenario/presets.cpp; sources in docs/presets.md).
inline ModelSpec preset(const std::string& name) {
  auto m = model_preset(name);
  if (!m) throw std::logic_error("no model preset '" + name + "'");
  return *m;
}
inline ModelSpec llama2_7b() { return preset("llama2-7b"); }
inline ModelSpec llama2_70b() { return preset("llama2-70b"); }
inline ModelSpec llama3_8b() { return preset("llama3-8b"); }
inline ModelSpec gpt3_175b() { return preset("gpt3-175b"); }
inline ModelSpec gpt2_1_5b() { return preset("gpt2-1.5b"); }

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

// Stage 3 on 2 ranks with the parameters on NVMe (max_in_cpu 0) and the optimizer on the CPU; two layers whose every
// matrix's partition is at least 1 MiB (DeepSpeed swaps those through its pool), released after each use
// (stage3_max_reuse_distance 0), so DeepSpeed's 5 buffers hold what a fetch needs.
inline Scenario nvme_swapping() {
  ModelSpec m = small_llama(2);
  m.hidden = 1024, m.ffn_hidden = 2048;
  Scenario s = scenario(m, 3, 1, 2);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  s.zero.offload_param.device = OffloadDevice::nvme;
  s.zero.offload_param.max_in_cpu = 0;
  s.zero.stage3_max_reuse_distance = 0;
  return s;
}

}  // namespace zsim::test
