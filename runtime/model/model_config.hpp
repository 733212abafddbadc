// ModelConfig: the transformer zrun trains, read from zsim's Scenario + Plan (same shapes, same units), and
// UnitRef: what one of the plan's units (FetchUnit::name, e.g. "L3.attn.q") is to the model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/dtype.hpp"
#include "sim/plan/plan.hpp"
#include "sim/scenario/scenario.hpp"

namespace zrun::model {

struct ModelConfig {
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t ffn = 0;
  std::int64_t vocab = 0;
  std::int64_t layers = 0;
  std::int64_t max_positions = 0;   // learned absolute positions (GPT); 0 = none
  bool bias = false;                // linears and norms carry biases; the norm is LayerNorm (else RMSNorm)
  bool gated = true;                // SwiGLU MLP (gate, up, down); else GeLU MLP (up, down)
  bool tied_head = false;           // logits = final_norm(x) @ embed.tokens^T
  bool checkpointing = false;       // full activation checkpointing: a layer keeps its input only
  bool flash_attention = false;     // model.attention: flash (keeps the row log-sum-exp, not the s x s scores)
  std::int64_t seq_len = 0;
  std::int64_t micro_batch = 0;
  DType dtype = DType::bf16;  // params, grads and activations (bf16, fp16 or fp32)
  float norm_eps = 1e-5f;

  std::int64_t tokens() const { return seq_len * micro_batch; }
  std::int64_t kv_dim() const { return kv_heads * head_dim; }
  std::int64_t elem_bytes() const { return dtype_bytes(dtype); }
};

// The model of a scenario, as its plan shapes it. Throws std::invalid_argument for what zrun cannot run
// (heads not dividing hidden, kv_heads not dividing heads, seq_len above max_position_embeddings, flash
// attention outside bf16 / fp16 with head dim 64 or 128).
ModelConfig model_config(const zsim::Scenario& s, const zsim::Plan& p);

// What a plan unit computes.
enum class UnitKind { embedding, attn_norm, attn_q, attn_k, attn_v, attn_o, mlp_norm, mlp_gate, mlp_up, mlp_down,
                      final_norm, head };

struct UnitRef {
  UnitKind kind = UnitKind::embedding;
  int layer = -1;
};

// Parses a FetchUnit name ("embedding", "L3.mlp.up", "final.norm", "head"); throws on an unknown name.
UnitRef unit_ref(const std::string& unit_name);

// The full, model-wide name of one tensor of a unit: "L3.attn.q.bias", "embed.tokens", "final.norm.weight".
// Initialisation is keyed by it.
std::string tensor_full_name(const std::string& unit_name, const std::string& tensor_name);

}  // namespace zrun::model
