#include "sim/plan/model_shapes.hpp"

#include <gtest/gtest.h>

#include "sim/plan/test_scenarios.hpp"

using namespace zsim;

TEST(ModelShapes, TinyGatedGqaModelMatchesHandCount) {
  ModelSpec m;
  m.layers = 2, m.hidden = 8, m.ffn_hidden = 16, m.heads = 2, m.kv_heads = 1, m.vocab = 10;
  m.mlp = MlpKind::gated;
  const ModelShapes s = model_shapes(m);
  // norms 2*8; q 8*8, k 8*4, v 8*4, o 8*8; gate/up/down 3*8*16
  const Elements layer = 2 * 8 + 64 + 32 + 32 + 64 + 3 * 128;
  EXPECT_EQ(s.layer.params(), layer);
  EXPECT_EQ(s.embedding.params(), 10 * 8);
  EXPECT_EQ(s.head.params(), 8 + 8 * 10);  // final norm + untied output matrix
  EXPECT_EQ(s.total_params(), 80 + 2 * layer + 88);
}

TEST(ModelShapes, TinyPlainBiasedTiedModelWithPositionsMatchesHandCount) {
  ModelSpec m;
  m.layers = 2, m.hidden = 8, m.ffn_hidden = 32, m.heads = 2, m.kv_heads = 2, m.vocab = 10;
  m.max_position_embeddings = 6, m.tie_word_embeddings = true, m.mlp = MlpKind::plain, m.bias = true;
  const ModelShapes s = model_shapes(m);
  // 2 LayerNorms (w + b); q,k,v,o 8*8 + 8; up 8*32 + 32; down 32*8 + 8
  const Elements layer = 2 * 16 + 4 * 72 + (256 + 32) + (256 + 8);
  EXPECT_EQ(s.layer.params(), layer);
  EXPECT_EQ(s.embedding.params(), 10 * 8 + 6 * 8);
  EXPECT_EQ(s.head.params(), 16);  // tied: only the final LayerNorm
  EXPECT_EQ(s.total_params(), 128 + 2 * layer + 16);
  EXPECT_EQ(s.largest_module_params(), 256 + 32);  // the MLP up-projection with its bias
}

// Published totals, 1% tolerance (papers round; HF configs give the exact figures).
TEST(ModelShapes, PublishedTotalsWithinOnePercent) {
  EXPECT_NEAR(model_shapes(test::llama2_7b()).total_params(), 6.74e9, 0.01 * 6.74e9);
  EXPECT_NEAR(model_shapes(test::llama3_8b()).total_params(), 8.03e9, 0.01 * 8.03e9);
  EXPECT_NEAR(model_shapes(test::gpt3_175b()).total_params(), 1.75e11, 0.01 * 1.75e11);
  EXPECT_NEAR(model_shapes(test::gpt2_1_5b()).total_params(), 1.558e9, 0.01 * 1.558e9);
}

// Exact counts of the Hugging Face checkpoints (sum of numel over the state dict). Llama 2 70B is
// 68.98e9, not the 70e9 of its name.
TEST(ModelShapes, LlamaTotalsAreExactlyTheHuggingFaceCounts) {
  EXPECT_EQ(model_shapes(test::llama2_7b()).total_params(), 6738415616);
  EXPECT_EQ(model_shapes(test::llama2_70b()).total_params(), 68976648192);
}

TEST(ModelShapes, LargestLayerAndModule) {
  const ModelShapes s = model_shapes(test::llama2_7b());
  EXPECT_EQ(s.largest_layer_params(), s.layer.params());        // a decoder layer (202M) > embedding (131M)
  EXPECT_EQ(s.largest_module_params(), 32000 * 4096);           // embedding / lm_head matrix
}
