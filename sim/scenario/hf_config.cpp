#include "sim/scenario/hf_config.hpp"

#include <algorithm>
#include <string_view>

#include "sim/scenario/hf_families.hpp"
#include "sim/scenario/hf_reader.hpp"
#include "sim/scenario/scenario_validate.hpp"

namespace zsim {
namespace {

// Keys that give a model shapes zsim does not build: a mixture of experts (its own issue) or DeepSeek's multi-head
// latent attention. Each stops the read, never a dense guess.
struct RefusedKey {
  const char* key;
  const char* what;
  bool read_by_moe_families;  // Mixtral's and Qwen3-MoE's readers take it
};
constexpr RefusedKey kRefusedKeys[] = {
    {"num_local_experts", "a mixture of experts (Mixtral's experts)", true},
    {"num_experts", "a mixture of experts (Qwen-MoE's experts)", true},
    {"n_routed_experts", "a mixture of experts (DeepSeek's routed experts)", false},
    {"moe_intermediate_size", "a mixture of experts (the experts' width)", true},
    {"n_shared_experts", "a mixture of experts (DeepSeek's shared experts)", false},
    {"kv_lora_rank", "DeepSeek's multi-head latent attention", false},
    {"q_lora_rank", "DeepSeek's multi-head latent attention", false},
};

// A family that reads a mixture of experts (Mixtral, Qwen3-MoE) takes its experts' keys; DeepSeek's are refused.
void refuse_unmodelled_keys(const HfReader& hf, const HfFamily* family) {
  for (const auto& [key, what, read_by_moe_families] : kRefusedKeys) {
    if (!hf.has(key) || (read_by_moe_families && family && family->moe)) continue;
    if (std::string_view(key) == "num_experts" && hf.integer({key}).value_or(0) == 0) continue;
    throw InputError(hf.where(key), std::string(what) + " is not modelled: zsim would read this model as a dense one "
                                                       "and misstate its size. Supported model types: " +
                                        supported_model_types());
  }
}

// The dimensions every family names (under one of its spellings).
void read_dimensions(const HfReader& hf, ModelSpec& m) {
  m.hidden = hf.required({"hidden_size", "n_embd", "d_model"});
  m.layers = hf.required({"num_hidden_layers", "n_layer", "num_layers"});
  m.heads = hf.required({"num_attention_heads", "n_head", "num_heads"});
  m.vocab = hf.required({"vocab_size"});
  m.kv_heads = hf.integer({"num_key_value_heads", "num_kv_heads"}).value_or(m.heads);
  // GPT-2's n_inner is null for the default 4 x hidden.
  m.ffn_hidden = hf.integer({"intermediate_size", "n_inner", "ffn_dim", "d_ff"})
                     .value_or(m.hidden >= 0 && m.hidden <= kMaxHidden ? 4 * m.hidden : 0);  // bad hidden: fails validation
}

// transformers' attention implementation: "eager" materialises the scores; "sdpa", "flash_attention_2/3" and
// "flex_attention" run fused kernels that keep no s x s tensor. Absent: the default, flash.
void read_attention_implementation(const HfReader& hf, ModelSpec& m) {
  for (const char* key : {"_attn_implementation", "attn_implementation"}) {
    const std::string impl = hf.string(key);
    if (impl.empty()) continue;
    auto a = attention_from_hf_implementation(impl);
    if (!a)
      throw InputError(hf.where(key), "unknown attention implementation '" + impl +
                                          "' (known: eager, sdpa, flash_attention_2, flash_attention_3, flex_attention)");
    m.attention = *a;
    return;
  }
}

}  // namespace

ModelSpec model_from_hf_config(const YAML::Node& root, const std::string& file, const std::string& name) {
  if (!root.IsMap()) throw InputError({file, 1, 1, ""}, "a Hugging Face config.json must be a JSON object");
  HfReader hf(root, file);
  const std::string model_type = hf.string("model_type");
  if (model_type.empty())
    throw InputError({file, 1, 1, "model_type"}, "Hugging Face config lacks 'model_type', which says how transformers "
                                                 "builds the model. Supported: " + supported_model_types());
  const HfFamily* family = hf_family_of(model_type);
  refuse_unmodelled_keys(hf, family);
  if (!family)
    throw InputError(hf.where("model_type"), "model type '" + model_type + "' is not modelled. Supported: " +
                                                 supported_model_types());
  ModelSpec m;
  m.name = name;
  m.arch.model_type = model_type;
  read_dimensions(hf, m);
  family->read(hf, m);
  // `bias` keeps its meaning for the rest of zsim: every projection and norm carries one (the GPT-2 family).
  m.bias = m.arch.norm == NormKind::layer && m.arch.qkv_bias && m.arch.o_bias && m.arch.mlp_bias;
  read_attention_implementation(hf, m);
  return m;
}

}  // namespace zsim
