#include "sim/plan/activation_model.hpp"

#include <gtest/gtest.h>

#include "sim/plan/test_scenarios.hpp"

using namespace zsim;

namespace {
TrainingSpec training(std::int64_t s, std::int64_t b, Checkpointing c = Checkpointing::none) {
  TrainingSpec t;
  t.seq_len = s;
  t.micro_batch = b;
  t.activation_checkpointing = c;
  return t;
}
}  // namespace

// Korthikanti et al. 2022, eq. (1): sbh(34 + 5as/h) bytes per GPT layer, 16-bit, no recomputation.
TEST(ActivationModel, GptLayerIsKorthikanti) {
  const ModelSpec m = test::gpt3_175b();
  for (auto [s, b] : {std::pair<std::int64_t, std::int64_t>{2048, 1}, {1024, 4}}) {
    const double h = m.hidden, a = m.heads;
    const double oracle = s * b * h * (34 + 5 * a * s / h);
    EXPECT_EQ(activation_bytes(m, training(s, b)).per_layer_no_recompute, static_cast<Bytes>(oracle));
  }
}

TEST(ActivationModel, FullCheckpointKeepsTheLayerInput) {
  const ModelSpec m = test::gpt3_175b();
  EXPECT_EQ(activation_bytes(m, training(2048, 2, Checkpointing::full)).per_layer_checkpoint, 2 * 2048 * 2 * 12288);
}

TEST(ActivationModel, GroupedQueryAttentionSavesTheSmallerKeysAndValues) {
  ModelSpec mha = test::gpt3_175b();
  ModelSpec gqa = mha;
  gqa.kv_heads = mha.heads / 8;
  const Bytes s = 2048, b = 1, h = mha.hidden;
  // K and V shrink from h to h/8 columns each: 2 tensors * 2 bytes * sb(h - h/8).
  EXPECT_EQ(activation_bytes(mha, training(s, b)).per_layer_no_recompute -
                activation_bytes(gqa, training(s, b)).per_layer_no_recompute,
            2 * 2 * s * b * (h - h / 8));
}

TEST(ActivationModel, GatedMlpKeepsFourFfnWideTensors) {
  ModelSpec m = test::llama2_7b();
  const Bytes s = 4096, b = 1, h = m.hidden, f = m.ffn_hidden, a = m.heads;
  // attention 11sbh + 5as^2b, gated MLP 3sbh + 8sbf, norms 4sbh
  EXPECT_EQ(activation_bytes(m, training(s, b)).per_layer_no_recompute,
            11 * s * b * h + 5 * a * s * s * b + 3 * s * b * h + 8 * s * b * f + 4 * s * b * h);
}
