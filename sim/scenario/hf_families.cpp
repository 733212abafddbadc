#include "sim/scenario/hf_families.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace zsim {
namespace {

// ---- what families share ----

// A rotary (Llama-like) decoder: untied unless the config ties, RMSNorm, SiLU-gated MLP, no biases.
void llama_like(const HfReader& hf, ModelSpec& m, bool tie_default) {
  m.mlp = MlpKind::gated;
  m.tie_word_embeddings = hf.boolean("tie_word_embeddings").value_or(tie_default);
  m.arch.head_dim = hf.integer({"head_dim"}).value_or(0);
  m.attention_dropout = hf.real({"attention_dropout"}).value_or(0.0);
}

// attention_bias on all four projections (LlamaAttention: q, k, v and o_proj take bias=config.attention_bias).
void attention_bias_all(const HfReader& hf, ModelSpec& m, bool def = false) {
  m.arch.qkv_bias = m.arch.o_bias = hf.boolean("attention_bias").value_or(def);
}

// A key the family reads that would change shapes zsim does not build: refused with its place.
[[noreturn]] void refuse(const HfReader& hf, const char* key, const std::string& why) {
  throw InputError(hf.where(key), why + " is not modelled");
}

// sliding_window's layers: those `layer_types` names "sliding_attention" where the file lists them, else the family's
// pattern (`every`: all layers; else each layer i with (i + 1) % every != 0).
void read_sliding_window(const HfReader& hf, ModelSpec& m, std::optional<std::int64_t> window_default, int every) {
  const auto w = hf.written("sliding_window") ? hf.integer({"sliding_window"}) : window_default;  // null: none
  if (!w || *w <= 0) return;
  m.arch.sliding_window = *w;
  if (const auto types = hf.first({"layer_types"}); types && types->second.IsSequence()) {
    m.arch.sliding_layers = 0;
    for (const auto& t : types->second)
      if (t.IsScalar() && t.Scalar() == "sliding_attention") ++m.arch.sliding_layers;
    return;
  }
  m.arch.sliding_layers = 0;
  for (std::int64_t i = 0; i < m.layers; ++i)
    if (every <= 1 || (i + 1) % every != 0) ++m.arch.sliding_layers;
}

// ---- the families ----

// llama/modeling_llama.py (LlamaConfig: tie_word_embeddings false, attention_bias false, mlp_bias false).
void read_llama(const HfReader& hf, ModelSpec& m) {
  llama_like(hf, m, false);
  attention_bias_all(hf, m);
  m.arch.mlp_bias = hf.boolean("mlp_bias").value_or(false);
}

// granite/modeling_granite.py: Llama's layer with scalar multipliers (embedding, residual, attention, logits), which
// change no shape and save no tensor.
void read_granite(const HfReader& hf, ModelSpec& m) { read_llama(hf, m); }

// mistral/modeling_mistral.py: Llama's layer without biases; head_dim from the config (Mistral-Nemo: 128).
void read_mistral(const HfReader& hf, ModelSpec& m) {
  llama_like(hf, m, false);
  read_sliding_window(hf, m, 4096, 1);  // MistralConfig: sliding_window 4096 on every layer
}

// qwen2/modeling_qwen2.py: biases on q, k and v only (Qwen2Attention: bias=True on q/k/v_proj, False on o_proj).
void read_qwen2(const HfReader& hf, ModelSpec& m) {
  llama_like(hf, m, false);
  m.arch.qkv_bias = true;
}

// qwen3/modeling_qwen3.py: Qwen3Config's head_dim defaults to 128; q_norm and k_norm are RMSNorms of head_dim on
// each head, after q_proj and k_proj; biases with attention_bias.
void read_qwen3(const HfReader& hf, ModelSpec& m) {
  llama_like(hf, m, false);
  if (m.arch.head_dim == 0) m.arch.head_dim = 128;
  attention_bias_all(hf, m);
  m.arch.qk_norm = QkNorm::per_head;
}

// gemma/modeling_gemma.py: GemmaRMSNorm ((1 + weight), in fp32), GELU-tanh gated MLP, embeddings scaled by
// sqrt(hidden), tied head; GemmaConfig's head_dim defaults to 256.
void read_gemma(const HfReader& hf, ModelSpec& m) {
  llama_like(hf, m, true);
  if (m.arch.head_dim == 0) m.arch.head_dim = 256;
  attention_bias_all(hf, m);
  m.arch.norm = NormKind::rms_gemma;
  m.arch.act = ActKind::gelu_tanh;  // hidden_activation (GemmaConfig default gelu_pytorch_tanh)
}

// gemma2/modeling_gemma2.py: Gemma's layer with sandwich norms (post_attention_layernorm on the attention's output,
// pre_ and post_feedforward_layernorm around the MLP); eager attention soft-caps its scores.
void read_gemma2(const HfReader& hf, ModelSpec& m) {
  read_gemma(hf, m);
  m.arch.block = BlockKind::sandwich;
  // Gemma2Config: attn_logit_softcapping 50, final_logit_softcapping 30, sliding_window 4096 on every other layer
  m.arch.attn_softcapping = hf.has("attn_logit_softcapping") || !hf.written("attn_logit_softcapping");
  m.arch.final_softcapping = hf.has("final_logit_softcapping") || !hf.written("final_logit_softcapping");
  read_sliding_window(hf, m, 4096, 2);
}

// gemma3/modeling_gemma3.py (Gemma3ForCausalLM, model_type gemma3_text): Gemma-2's layer with q_norm and k_norm
// (Gemma3RMSNorm of head_dim on each head).
void read_gemma3_text(const HfReader& hf, ModelSpec& m) {
  read_gemma2(hf, m);
  m.arch.qk_norm = QkNorm::per_head;
  // Gemma3TextConfig: no soft-capping by default; sliding_window 4096 on five layers of six
  m.arch.attn_softcapping = hf.first({"attn_logit_softcapping"}).has_value();
  m.arch.final_softcapping = hf.first({"final_logit_softcapping"}).has_value();
  read_sliding_window(hf, m, 4096, 6);
}

// mixtral/modeling_mixtral.py: Mistral's attention; the MLP a MixtralSparseMoeBlock: a router (MixtralTopKRouter,
// softmax in fp32, top num_experts_per_tok (default 2) renormalized, kept in fp32) and MixtralExperts (3-D gate_up_proj
// and down_proj of num_local_experts (default 8) experts of intermediate_size).
void read_mixtral(const HfReader& hf, ModelSpec& m) {
  llama_like(hf, m, false);
  read_sliding_window(hf, m, std::nullopt, 1);
  m.arch.experts = hf.integer({"num_local_experts"}).value_or(8);
  m.arch.experts_per_token = hf.integer({"num_experts_per_tok"}).value_or(2);
  m.arch.expert_ffn = m.ffn_hidden;
  m.arch.router_weights_fp32 = true;
  m.arch.norm_topk_prob = true;
}

// qwen3_moe/modeling_qwen3_moe.py: Qwen3's attention; every layer's MLP a Qwen3MoeSparseMoeBlock (num_experts
// experts of moe_intermediate_size, top num_experts_per_tok, renormalized where norm_topk_prob (default false), cast
// to the dtype). decoder_sparse_step other than 1 or mlp_only_layers make some layers dense: refused by name.
void read_qwen3_moe(const HfReader& hf, ModelSpec& m) {
  read_qwen3(hf, m);
  m.arch.experts = hf.integer({"num_experts"}).value_or(128);
  m.arch.experts_per_token = hf.integer({"num_experts_per_tok"}).value_or(8);
  m.arch.expert_ffn = hf.integer({"moe_intermediate_size"}).value_or(768);
  m.arch.norm_topk_prob = hf.boolean("norm_topk_prob").value_or(false);
  if (hf.integer({"decoder_sparse_step"}).value_or(1) != 1)
    refuse(hf, "decoder_sparse_step", "dense layers among the sparse ones (decoder_sparse_step other than 1)");
  if (const auto dense = hf.first({"mlp_only_layers"}); dense && dense->second.IsSequence() && dense->second.size() > 0)
    refuse(hf, "mlp_only_layers", "dense layers among the sparse ones (mlp_only_layers)");
}

// phi3/modeling_phi3.py: one qkv_proj and one gate_up_proj, no biases; resid_pdrop after both branches, embd_pdrop
// on the embeddings (Phi3Config defaults 0).
void read_phi3(const HfReader& hf, ModelSpec& m) {
  llama_like(hf, m, false);
  m.arch.head_dim = 0;  // Phi3Attention: hidden_size // num_attention_heads
  m.arch.fused_qkv = true;
  m.arch.fused_gate_up = true;
  m.hidden_dropout = hf.real({"resid_pdrop"}).value_or(0.0);
  m.arch.embedding_dropout = hf.real({"embd_pdrop"}).value_or(0.0);
  read_sliding_window(hf, m, std::nullopt, 1);
}

// olmo2/modeling_olmo2.py: norms after each branch (post_attention_layernorm, post_feedforward_layernorm) and none
// before; q_norm and k_norm over the whole of q and k.
void read_olmo2(const HfReader& hf, ModelSpec& m) {
  llama_like(hf, m, false);
  m.arch.head_dim = 0;
  attention_bias_all(hf, m);
  m.arch.norm = NormKind::rms_weight_fp32;
  m.arch.block = BlockKind::post_norm;
  m.arch.qk_norm = QkNorm::full_width;
}

// cohere/modeling_cohere.py: one CohereLayerNorm (no bias) feeding attention and MLP in parallel, SiLU-gated MLP,
// tied head (CohereConfig default), logit_scale (a scalar); use_qk_norm's per-head LayerNorms are not built.
void read_cohere(const HfReader& hf, ModelSpec& m) {
  llama_like(hf, m, true);
  m.arch.head_dim = 0;
  attention_bias_all(hf, m);
  m.arch.norm = NormKind::layer_no_bias;
  m.arch.block = BlockKind::parallel_shared_norm;
  if (hf.boolean("use_qk_norm").value_or(false)) refuse(hf, "use_qk_norm", "Cohere's per-head q/k LayerNorms");
}

// gpt_neox/modeling_gpt_neox.py: LayerNorms, one query_key_value projection, dense; MLP dense_h_to_4h, GELU,
// dense_4h_to_h, all biased (attention_bias default true); parallel residual (use_parallel_residual default true);
// rotary on rotary_pct of each head (default 0.25); embed_out untied; hidden_dropout and attention_dropout default 0.
void read_gpt_neox(const HfReader& hf, ModelSpec& m) {
  m.mlp = MlpKind::plain;
  m.tie_word_embeddings = hf.boolean("tie_word_embeddings").value_or(false);
  m.arch.norm = NormKind::layer;
  m.arch.fused_qkv = true;
  m.arch.qkv_bias = m.arch.o_bias = hf.boolean("attention_bias").value_or(true);
  m.arch.mlp_bias = true;
  m.arch.act = ActKind::gelu;  // hidden_act default "gelu"
  m.arch.block = hf.boolean("use_parallel_residual").value_or(true) ? BlockKind::parallel : BlockKind::pre_norm;
  m.arch.rotary_fraction = hf.real({"rotary_pct", "partial_rotary_factor"}).value_or(0.25);
  m.attention_dropout = hf.real({"attention_dropout"}).value_or(0.0);
  m.hidden_dropout = hf.real({"hidden_dropout"}).value_or(0.0);
}

// opt/modeling_opt.py: learned positions with 2 extra rows (OPTLearnedPositionalEmbedding's offset), LayerNorms,
// q/k/v/out_proj and fc1/fc2 biased (enable_bias default true), ReLU, dropout (default 0.1) after both branches,
// tied head (OPTConfig tie_word_embeddings default true).
void read_opt(const HfReader& hf, ModelSpec& m) {
  m.mlp = MlpKind::plain;
  m.tie_word_embeddings = hf.boolean("tie_word_embeddings").value_or(true);
  m.max_position_embeddings = hf.integer({"max_position_embeddings"}).value_or(2048);
  m.arch.position_offset = 2;
  m.arch.norm = NormKind::layer;
  m.arch.qkv_bias = m.arch.o_bias = m.arch.mlp_bias = hf.boolean("enable_bias").value_or(true);
  m.bias = m.arch.qkv_bias;
  m.arch.act = ActKind::relu;
  if (const auto w = hf.integer({"word_embed_proj_dim"}); w && *w != m.hidden)
    refuse(hf, "word_embed_proj_dim", "OPT's project_in / project_out (word_embed_proj_dim != hidden_size)");
  if (!hf.boolean("do_layer_norm_before").value_or(true))
    refuse(hf, "do_layer_norm_before", "OPT's post-norm layer (do_layer_norm_before false)");
  if (hf.real({"activation_dropout"}).value_or(0.0) > 0)
    refuse(hf, "activation_dropout", "dropout inside OPT's MLP (activation_dropout > 0)");
  if (!hf.boolean("layer_norm_elementwise_affine").value_or(true))
    refuse(hf, "layer_norm_elementwise_affine", "LayerNorms without weights (layer_norm_elementwise_affine false)");
  m.hidden_dropout = hf.real({"dropout"}).value_or(0.1);
  m.attention_dropout = hf.real({"attention_dropout"}).value_or(0.0);
}

// gpt2/modeling_gpt2.py: learned positions (n_positions, default 1024), LayerNorms, one c_attn (Conv1D to q | k |
// v), all biased, gelu_new, tied head; GPT2Config's dropouts (attn_pdrop, resid_pdrop, embd_pdrop) default to 0.1.
void read_gpt2(const HfReader& hf, ModelSpec& m) {
  m.mlp = MlpKind::plain;
  m.bias = true;
  m.tie_word_embeddings = hf.boolean("tie_word_embeddings").value_or(true);
  m.max_position_embeddings = hf.integer({"n_positions", "max_position_embeddings"}).value_or(1024);
  m.arch.norm = NormKind::layer;
  m.arch.fused_qkv = true;
  m.arch.qkv_bias = m.arch.o_bias = m.arch.mlp_bias = true;
  m.arch.act = ActKind::gelu_new;
  m.attention_dropout = hf.real({"attn_pdrop"}).value_or(0.1);
  m.hidden_dropout = hf.real({"resid_pdrop"}).value_or(0.1);
  m.arch.embedding_dropout = hf.real({"embd_pdrop"}).value_or(0.1);
}

// starcoder2/modeling_starcoder2.py: LayerNorms (with bias), q/k/v/o and the MLP's c_fc / c_proj biased with use_bias
// (default true), GELU-tanh plain MLP, tied head (Starcoder2Config default); residual_dropout after both branches,
// embedding_dropout, attention_dropout (defaults 0).
void read_starcoder2(const HfReader& hf, ModelSpec& m) {
  m.mlp = MlpKind::plain;
  m.tie_word_embeddings = hf.boolean("tie_word_embeddings").value_or(true);
  m.arch.norm = NormKind::layer;
  m.arch.qkv_bias = m.arch.o_bias = m.arch.mlp_bias = hf.boolean("use_bias").value_or(true);
  m.arch.act = ActKind::gelu_tanh;
  m.attention_dropout = hf.real({"attention_dropout"}).value_or(0.0);
  m.hidden_dropout = hf.real({"residual_dropout"}).value_or(0.0);
  m.arch.embedding_dropout = hf.real({"embedding_dropout"}).value_or(0.0);
  read_sliding_window(hf, m, std::nullopt, 1);
}

// Kernels' traffic and host time: Llama's layer for the gated families, GPT-2's for the plain ones, until each
// family's own is modelled and measured under DeepSpeed (docs/architectures.md).
constexpr const char* kAsLlama = "Llama's layer";
constexpr const char* kAsGpt2 = "GPT-2's layer";

const HfFamily kFamilies[] = {
    {"llama", "llama/modeling_llama.py", read_llama},
    {"mistral", "mistral/modeling_mistral.py", read_mistral},
    {"granite", "granite/modeling_granite.py", read_granite, kAsLlama},
    {"qwen2", "qwen2/modeling_qwen2.py", read_qwen2},
    {"qwen3", "qwen3/modeling_qwen3.py", read_qwen3, kAsLlama},
    {"gemma", "gemma/modeling_gemma.py", read_gemma, kAsLlama},
    {"gemma2", "gemma2/modeling_gemma2.py", read_gemma2, kAsLlama},
    {"gemma3_text", "gemma3/modeling_gemma3.py", read_gemma3_text, kAsLlama},
    {"phi3", "phi3/modeling_phi3.py", read_phi3, kAsLlama},
    {"olmo2", "olmo2/modeling_olmo2.py", read_olmo2, kAsLlama},
    {"gpt_neox", "gpt_neox/modeling_gpt_neox.py", read_gpt_neox, kAsGpt2},
    {"opt", "opt/modeling_opt.py", read_opt, kAsGpt2},
    {"gpt2", "gpt2/modeling_gpt2.py", read_gpt2},
    {"starcoder2", "starcoder2/modeling_starcoder2.py", read_starcoder2, kAsGpt2},
    {"cohere", "cohere/modeling_cohere.py", read_cohere, kAsLlama},
    {"mixtral", "mixtral/modeling_mixtral.py", read_mixtral, kAsLlama, true},
    {"qwen3_moe", "qwen3_moe/modeling_qwen3_moe.py", read_qwen3_moe, kAsLlama, true},
};

}  // namespace

const HfFamily* hf_family_of(const std::string& model_type) {
  for (const HfFamily& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

std::string supported_model_types() {
  std::vector<std::string> names;
  for (const HfFamily& f : kFamilies) names.push_back(f.model_type);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string hf_pricing_warning(const ArchSpec& arch) {
  const HfFamily* f = arch.model_type.empty() ? nullptr : hf_family_of(arch.model_type);
  if (!f || std::string(f->priced_as).empty()) return "";
  return "model type '" + arch.model_type + "': its tensors and the activations its layers save follow " +
         f->follows + ", but its kernels' memory traffic and DeepSpeed's host time are priced as " + f->priced_as +
         ": its step time is an estimate not yet measured under DeepSpeed for this family (docs/architectures.md)";
}

}  // namespace zsim
