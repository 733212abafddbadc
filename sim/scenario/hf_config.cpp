#include "sim/scenario/hf_config.hpp"

#include <optional>
#include <set>

#include "sim/common/error.hpp"
#include "sim/scenario/scalar_values.hpp"
#include "sim/scenario/scenario_validate.hpp"
#include "sim/scenario/yaml_document.hpp"

namespace zsim {
namespace {

// Model families whose positions are a learned table of max_position_embeddings rows.
const std::set<std::string> kLearnedPositions = {"gpt2", "gpt_neo", "opt", "gpt_bigcode", "biogpt", "bert",
                                                 "roberta"};
// Families whose MLP is gated (SwiGLU/GeGLU: gate, up and down projections).
const std::set<std::string> kGatedMlp = {"llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2",
                                         "gemma3_text", "phi3", "internlm2", "olmo", "olmo2", "cohere",
                                         "deepseek_v2", "deepseek_v3", "granite"};
// Families whose linear layers and norms carry biases (when the config has no attention_bias key).
const std::set<std::string> kBiased = {"gpt2", "gpt_neo", "opt", "bloom", "gpt_bigcode", "gptj", "gpt_neox",
                                       "falcon", "bert", "roberta", "biogpt", "starcoder2"};

class HfReader {
 public:
  HfReader(const YAML::Node& root, std::string file) : root_(root), file_(std::move(file)) {}

  // The first of `keys` present (and not null).
  std::optional<std::pair<std::string, YAML::Node>> first(std::initializer_list<const char*> keys) const {
    for (const char* k : keys) {
      YAML::Node v = root_[k];
      if (v.IsDefined() && !v.IsNull()) return std::make_pair(std::string(k), v);
    }
    return std::nullopt;
  }

  std::optional<std::int64_t> integer(std::initializer_list<const char*> keys) const {
    auto kv = first(keys);
    if (!kv) return std::nullopt;
    auto r = kv->second.IsScalar() ? parse_integer(kv->second.Scalar()) : std::nullopt;
    if (!r) throw InputError(location_of(kv->second, file_, kv->first), "expected an integer, got " +
                                                                           describe_node(kv->second));
    return r;
  }

  std::optional<bool> boolean(const char* key) const {
    auto kv = first({key});
    if (!kv) return std::nullopt;
    auto r = kv->second.IsScalar() ? parse_bool(kv->second.Scalar()) : std::nullopt;
    if (!r) throw InputError(location_of(kv->second, file_, key), "expected true or false, got " +
                                                                     describe_node(kv->second));
    return r;
  }

  std::optional<double> real(std::initializer_list<const char*> keys) const {
    auto kv = first(keys);
    if (!kv) return std::nullopt;
    auto r = kv->second.IsScalar() ? parse_real(kv->second.Scalar()) : std::nullopt;
    if (!r) throw InputError(location_of(kv->second, file_, kv->first), "expected a number, got " +
                                                                           describe_node(kv->second));
    return r;
  }

  SourceLocation where(const char* key) const {
    auto kv = first({key});
    return kv ? location_of(kv->second, file_, key) : SourceLocation{file_, 1, 1, key};
  }

  std::string string(const char* key) const {
    auto kv = first({key});
    if (!kv) return "";
    if (!kv->second.IsScalar())
      throw InputError(location_of(kv->second, file_, key), "expected a string, got " + describe_node(kv->second));
    return kv->second.Scalar();
  }

  std::int64_t required(std::initializer_list<const char*> keys) const {
    auto v = integer(keys);
    if (!v) throw InputError({file_, 1, 1, *keys.begin()}, "Hugging Face config lacks '" +
                                                               std::string(*keys.begin()) + "'");
    return *v;
  }

 private:
  YAML::Node root_;
  std::string file_;
};

}  // namespace

ModelSpec model_from_hf_config(const YAML::Node& root, const std::string& file, const std::string& name) {
  if (!root.IsMap()) throw InputError({file, 1, 1, ""}, "a Hugging Face config.json must be a JSON object");
  HfReader hf(root, file);
  ModelSpec m;
  m.name = name;
  const std::string model_type = hf.string("model_type");
  m.hidden = hf.required({"hidden_size", "n_embd", "d_model"});
  m.layers = hf.required({"num_hidden_layers", "n_layer", "num_layers"});
  m.heads = hf.required({"num_attention_heads", "n_head", "num_heads"});
  m.vocab = hf.required({"vocab_size"});
  m.kv_heads = hf.integer({"num_key_value_heads", "num_kv_heads"}).value_or(m.heads);
  m.mlp = kGatedMlp.count(model_type) ? MlpKind::gated : MlpKind::plain;
  // GPT-2's n_inner is null for the default 4 x hidden.
  m.ffn_hidden = hf.integer({"intermediate_size", "n_inner", "ffn_dim", "d_ff"})
                     .value_or(m.hidden >= 0 && m.hidden <= kMaxHidden ? 4 * m.hidden : 0);  // bad hidden: fails validation
  // PretrainedConfig defaults tie_word_embeddings to true; Llama-family configs write false.
  m.tie_word_embeddings = hf.boolean("tie_word_embeddings").value_or(true);
  if (kLearnedPositions.count(model_type))
    m.max_position_embeddings = hf.integer({"max_position_embeddings", "n_positions"}).value_or(0);
  if (auto b = hf.boolean("attention_bias")) m.bias = *b;
  else m.bias = kBiased.count(model_type) > 0;
  // transformers' attention implementation: "eager" materialises the scores; "sdpa", "flash_attention_2/3"
  // and "flex_attention" run fused kernels that keep no s x s tensor. Absent: the default, flash.
  for (const char* key : {"_attn_implementation", "attn_implementation"}) {
    const std::string impl = hf.string(key);
    if (impl.empty()) continue;
    auto a = attention_from_hf_implementation(impl);
    if (!a) throw InputError(hf.where(key), "unknown attention implementation '" + impl +
                                                "' (known: eager, sdpa, flash_attention_2, flash_attention_3, "
                                                "flex_attention)");
    m.attention = *a;
    break;
  }
  // Dropout probabilities as the config classes name them; absent = 0 (no masks).
  m.attention_dropout = hf.real({"attention_dropout", "attn_pdrop", "attention_probs_dropout_prob"}).value_or(0.0);
  m.hidden_dropout = hf.real({"hidden_dropout", "resid_pdrop", "hidden_dropout_prob"}).value_or(0.0);
  return m;
}

}  // namespace zsim
