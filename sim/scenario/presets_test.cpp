#include "sim/scenario/presets.hpp"

#include <gtest/gtest.h>

namespace zsim {

// Parameter count of a decoder-only transformer from its shape: per layer attention (q, o: h x h; k, v:
// h x kv_dim), MLP (2 or 3 matrices of h x ffn), two norms; embeddings (untied: twice). Biases ignored.
static double approx_params(const ModelSpec& m) {
  double h = m.hidden, kv = static_cast<double>(m.kv_heads) * (h / m.heads);
  double attn = 2 * h * h + 2 * h * kv;
  double mlp = (m.mlp == MlpKind::gated ? 3 : 2) * h * m.ffn_hidden;
  double emb = (m.tie_word_embeddings ? 1 : 2) * h * m.vocab + h * m.max_position_embeddings;
  return m.layers * (attn + mlp + 2 * h) + emb;
}

TEST(Presets, EveryModelNamedInTheIssueExists) {
  for (const char* name : {"gpt2-1.5b", "gpt3-175b", "bloom-176b", "mt-nlg-530b", "llama2-7b", "llama2-13b",
                           "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b"})
    EXPECT_TRUE(model_preset(name).has_value()) << name;
}

TEST(Presets, ModelShapesGiveTheirPublishedParameterCounts) {
  // Published sizes (model cards / papers), within 3%.
  const std::pair<const char*, double> published[] = {
      {"gpt2-1.5b", 1.558e9}, {"gpt3-175b", 175e9},  {"bloom-176b", 176.2e9}, {"mt-nlg-530b", 530e9},
      {"llama2-7b", 6.74e9},  {"llama2-13b", 13.0e9}, {"llama2-70b", 69.0e9}, {"llama3-8b", 8.03e9},
      {"llama3-70b", 70.6e9}, {"llama3-405b", 405.9e9}};
  for (const auto& [name, params] : published) {
    auto m = model_preset(name);
    ASSERT_TRUE(m) << name;
    EXPECT_NEAR(approx_params(*m) / params, 1.0, 0.03) << name;
  }
}

TEST(Presets, GroupedQueryAttentionOnlyWhereTheModelHasIt) {
  EXPECT_EQ(model_preset("llama2-7b")->kv_heads, 32);
  EXPECT_EQ(model_preset("llama2-70b")->kv_heads, 8);
  EXPECT_EQ(model_preset("llama3-8b")->kv_heads, 8);
}

TEST(Presets, GpuDatasheetValues) {
  auto h100 = gpu_preset("h100-80gb");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->hbm_bytes, 80 * kGiB);
  EXPECT_DOUBLE_EQ(h100->hbm_GBps, 3350);
  EXPECT_NEAR(h100->peak_tflops, 989, 1);
  auto a100 = gpu_preset("a100-40gb");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->peak_tflops, 312);
  for (const auto& name : gpu_preset_names()) EXPECT_GT(gpu_preset(name)->peak_fp32_tflops, 0) << name;
  EXPECT_FALSE(gpu_preset("h100"));
}

// Dropout as each model was trained: GPT-2's config.json (attn_pdrop, resid_pdrop 0.1), Megatron-LM's
// defaults for GPT-3 and MT-NLG, BLOOM's and the Llama family's configs (0.0).
TEST(Presets, DropoutIsTheModelsOwn) {
  for (const char* name : {"gpt2-1.5b", "gpt3-175b", "mt-nlg-530b"}) {
    EXPECT_DOUBLE_EQ(model_preset(name)->attention_dropout, 0.1) << name;
    EXPECT_DOUBLE_EQ(model_preset(name)->hidden_dropout, 0.1) << name;
  }
  for (const char* name : {"bloom-176b", "llama2-7b", "llama2-70b", "llama3-8b", "llama3-405b"}) {
    EXPECT_EQ(model_preset(name)->attention_dropout, 0.0) << name;
    EXPECT_EQ(model_preset(name)->hidden_dropout, 0.0) << name;
  }
}

}  // namespace zsim
