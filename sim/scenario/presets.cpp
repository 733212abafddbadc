#include "sim/scenario/presets.hpp"

namespace zsim {
namespace {

struct NamedModel {
  const char* name;
  std::int64_t layers, hidden, ffn_hidden, heads, kv_heads, vocab, positions;
  bool tie;
  MlpKind mlp;
  bool bias;
  double attention_dropout, hidden_dropout;
};

// Every row is cited in docs/presets.md (HF config.json of the released checkpoint, or the paper).
constexpr NamedModel kModels[] = {
    // name          layers hidden  ffn     heads kv   vocab   positions tie    mlp              bias  attn/hidden dropout
    {"gpt2-1.5b",    48,  1600,  6400,  25,  25,  50257,  1024, true,  MlpKind::plain, true, 0.1, 0.1},
    {"gpt3-175b",    96,  12288, 49152, 96,  96,  50257,  2048, true,  MlpKind::plain, true, 0.1, 0.1},
    {"bloom-176b",   70,  14336, 57344, 112, 112, 250880, 0,    true,  MlpKind::plain, true, 0.0, 0.0},
    {"mt-nlg-530b",  105, 20480, 81920, 128, 128, 50257,  2048, true,  MlpKind::plain, true, 0.1, 0.1},
    {"llama2-7b",    32,  4096,  11008, 32,  32,  32000,  0,    false, MlpKind::gated, false, 0.0, 0.0},
    {"llama2-13b",   40,  5120,  13824, 40,  40,  32000,  0,    false, MlpKind::gated, false, 0.0, 0.0},
    {"llama2-70b",   80,  8192,  28672, 64,  8,   32000,  0,    false, MlpKind::gated, false, 0.0, 0.0},
    {"llama3-8b",    32,  4096,  14336, 32,  8,   128256, 0,    false, MlpKind::gated, false, 0.0, 0.0},
    {"llama3-70b",   80,  8192,  28672, 64,  8,   128256, 0,    false, MlpKind::gated, false, 0.0, 0.0},
    {"llama3-405b",  126, 16384, 53248, 128, 8,   128256, 0,    false, MlpKind::gated, false, 0.0, 0.0},
};

struct NamedGpu {
  const char* name;
  Bytes hbm_bytes;
  double hbm_GBps, peak_tflops, peak_fp32_tflops;
};

// NVIDIA datasheets (SXM parts). Capacity: the datasheet's "GB" of HBM taken as GiB, as the devices
// report it (e.g. A100 80GB: 81920 MiB); peak_tflops: dense (no sparsity) bf16/fp16 tensor core.
constexpr NamedGpu kGpus[] = {
    {"v100-32gb",  32 * kGiB,  900,  125,   15.7},
    {"a100-40gb",  40 * kGiB,  1555, 312,   19.5},
    {"a100-80gb",  80 * kGiB,  2039, 312,   19.5},
    {"h100-80gb",  80 * kGiB,  3350, 989.4, 67},
    {"h200-141gb", 141 * kGiB, 4800, 989.4, 67},
};

}  // namespace

std::optional<ModelSpec> model_preset(const std::string& name) {
  for (const auto& m : kModels) {
    if (name != m.name) continue;
    ModelSpec s;
    s.name = m.name;
    s.layers = m.layers;
    s.hidden = m.hidden;
    s.ffn_hidden = m.ffn_hidden;
    s.heads = m.heads;
    s.kv_heads = m.kv_heads;
    s.vocab = m.vocab;
    s.max_position_embeddings = m.positions;
    s.tie_word_embeddings = m.tie;
    s.mlp = m.mlp;
    s.bias = m.bias;
    s.attention_dropout = m.attention_dropout;
    s.hidden_dropout = m.hidden_dropout;
    return s;
  }
  return std::nullopt;
}

std::optional<GpuSpec> gpu_preset(const std::string& name) {
  for (const auto& g : kGpus) {
    if (name != g.name) continue;
    return GpuSpec{g.name, g.hbm_bytes, g.hbm_GBps, g.peak_tflops, g.peak_fp32_tflops};
  }
  return std::nullopt;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& m : kModels) names.emplace_back(m.name);
  return names;
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> names;
  for (const auto& g : kGpus) names.emplace_back(g.name);
  return names;
}

}  // namespace zsim
