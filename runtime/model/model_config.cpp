#include "runtime/model/model_config.hpp"

#include <stdexcept>

#include "runtime/model/flash_attention.hpp"

namespace zrun::model {

ModelConfig model_config(const zsim::Scenario& s, const zsim::Plan& p) {
  const zsim::ModelSpec& m = s.model;
  ModelConfig c;
  c.hidden = m.hidden;
  c.heads = m.heads;
  c.kv_heads = m.kv_heads > 0 ? m.kv_heads : m.heads;
  if (c.heads <= 0 || c.hidden % c.heads != 0)
    throw std::invalid_argument("model: hidden " + std::to_string(c.hidden) + " is not a multiple of heads " +
                                std::to_string(c.heads));
  if (c.heads % c.kv_heads != 0)
    throw std::invalid_argument("model: heads " + std::to_string(c.heads) + " is not a multiple of kv_heads " +
                                std::to_string(c.kv_heads));
  c.head_dim = c.hidden / c.heads;
  c.ffn = m.ffn_hidden;
  c.vocab = m.vocab;
  c.layers = m.layers;
  c.max_positions = m.max_position_embeddings;
  c.bias = m.bias;
  c.gated = m.mlp == zsim::MlpKind::gated;
  c.tied_head = p.tied_head;
  c.checkpointing = p.checkpointing;
  c.seq_len = s.training.seq_len;
  c.micro_batch = s.training.micro_batch;
  switch (p.dtype) {
    case zsim::DType::fp32: c.dtype = DType::fp32; break;
    case zsim::DType::bf16: c.dtype = DType::bf16; break;
    case zsim::DType::fp16: c.dtype = DType::fp16; break;
    default: throw std::invalid_argument("model: training dtype must be fp32, bf16 or fp16");
  }
  c.flash_attention = m.attention == zsim::Attention::flash;
  if (c.flash_attention && !flash_attention_supported(c.dtype, c.head_dim))
    throw std::invalid_argument("model: flash attention runs bf16 / fp16 with head dim 64 or 128 (this model: " +
                                std::string(dtype_name(c.dtype)) + ", head dim " + std::to_string(c.head_dim) +
                                "); set model.attention: eager");
  if (c.max_positions > 0 && c.seq_len > c.max_positions)
    throw std::invalid_argument("model: seq_len " + std::to_string(c.seq_len) + " exceeds max_position_embeddings " +
                                std::to_string(c.max_positions));
  return c;
}

UnitRef unit_ref(const std::string& name) {
  if (name == "embedding") return {UnitKind::embedding, -1};
  if (name == "final.norm") return {UnitKind::final_norm, -1};
  if (name == "head") return {UnitKind::head, -1};
  const auto dot = name.find('.');
  if (name.size() > 1 && name[0] == 'L' && dot != std::string::npos && dot > 1) {
    const int layer = std::stoi(name.substr(1, dot - 1));
    const std::string mod = name.substr(dot + 1);
    static const std::pair<const char*, UnitKind> kMods[] = {
        {"attn.norm", UnitKind::attn_norm}, {"attn.q", UnitKind::attn_q},     {"attn.k", UnitKind::attn_k},
        {"attn.v", UnitKind::attn_v},       {"attn.o", UnitKind::attn_o},     {"mlp.norm", UnitKind::mlp_norm},
        {"mlp.gate", UnitKind::mlp_gate},   {"mlp.up", UnitKind::mlp_up},     {"mlp.down", UnitKind::mlp_down}};
    for (const auto& [m, k] : kMods)
      if (mod == m) return {k, layer};
  }
  throw std::invalid_argument("model: unknown unit '" + name + "'");
}

std::string tensor_full_name(const std::string& unit_name, const std::string& tensor_name) {
  const UnitRef u = unit_ref(unit_name);
  return u.layer >= 0 ? "L" + std::to_string(u.layer) + "." + tensor_name : tensor_name;
}

}  // namespace zrun::model
