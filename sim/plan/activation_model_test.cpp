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
// The setup Korthikanti et al. analyse: materialised attention, dropout on the probabilities and on both
// residual branches.
ModelSpec eager_with_dropout(ModelSpec m) {
  m.attention = Attention::eager;
  m.attention_dropout = 0.1;
  m.hidden_dropout = 0.1;
  return m;
}
Bytes layer_bytes(const ModelSpec& m, std::int64_t s, std::int64_t b = 1) {
  return activation_bytes(m, training(s, b)).per_layer_no_recompute;
}
}  // namespace

// Korthikanti et al. 2022, eq. (1): sbh(34 + 5as/h) bytes per GPT layer, 16-bit, no recomputation, plus what
// the paper leaves out: the two LayerNorms' fp32 mean and rstd, 2 x 2 x 4 = 16 bytes per token.
TEST(ActivationModel, EagerGptLayerWithDropoutIsKorthikantiPlusTheNormsStatistics) {
  const ModelSpec m = eager_with_dropout(test::gpt3_175b());
  for (auto [s, b] : {std::pair<std::int64_t, std::int64_t>{2048, 1}, {1024, 4}}) {
    const double h = m.hidden, a = m.heads;
    const double oracle = s * b * h * (34 + 5 * a * s / h);
    EXPECT_EQ(layer_bytes(m, s, b), static_cast<Bytes>(oracle) + 16 * s * b);
  }
}

TEST(ActivationModel, FullCheckpointKeepsTheLayerInput) {
  const ModelSpec m = test::gpt3_175b();
  EXPECT_EQ(activation_bytes(m, training(2048, 2, Checkpointing::full)).per_layer_checkpoint, 2 * 2048 * 2 * 12288);
}

TEST(ActivationModel, GroupedQueryAttentionSavesTheSmallerKeysAndValues) {
  ModelSpec mha = eager_with_dropout(test::gpt3_175b());
  ModelSpec gqa = mha;
  gqa.kv_heads = mha.heads / 8;
  const Bytes s = 2048, b = 1, h = mha.hidden;
  // K and V shrink from h to h/8 columns each: 2 tensors * 2 bytes * sb(h - h/8).
  EXPECT_EQ(layer_bytes(mha, s, b) - layer_bytes(gqa, s, b), 2 * 2 * s * b * (h - h / 8));
}

TEST(ActivationModel, EagerGatedMlpWithDropoutKeepsFourFfnWideTensors) {
  const ModelSpec m = eager_with_dropout(test::llama2_7b());
  const Bytes s = 4096, b = 1, h = m.hidden, f = m.ffn_hidden, a = m.heads;
  // attention 11sbh + 5as^2b, gated MLP 3sbh + 8sbf, norms 4sbh + their fp32 statistics 16sb
  EXPECT_EQ(layer_bytes(m, s, b),
            11 * s * b * h + 5 * a * s * s * b + 3 * s * b * h + 8 * s * b * f + 4 * s * b * h + 16 * s * b);
}

// Without dropout no mask is kept: the two sbh residual masks and, eager, the probabilities' mask and the
// dropped-out copy go; the softmax output (2 bytes per score) stays.
TEST(ActivationModel, WithoutDropoutNoMasksAreKept) {
  ModelSpec with = eager_with_dropout(test::llama2_7b());
  ModelSpec without = with;
  without.attention_dropout = 0;
  without.hidden_dropout = 0;
  const Bytes s = 4096, b = 1, h = with.hidden, a = with.heads;
  EXPECT_EQ(layer_bytes(with, s) - layer_bytes(without, s), 2 * s * b * h + 3 * a * s * s * b);
}

// Flash attention has no s^2 term: doubling the sequence exactly doubles a layer's bytes.
TEST(ActivationModel, FlashAttentionLayerHasNoQuadraticTerm) {
  ModelSpec m = test::llama2_7b();
  m.attention = Attention::flash;
  for (double p : {0.0, 0.1}) {
    m.attention_dropout = m.hidden_dropout = p;
    EXPECT_EQ(layer_bytes(m, 16384), 2 * layer_bytes(m, 8192)) << "dropout " << p;
  }
}

// The FlashAttention paper (Dao et al. 2022, arXiv 2205.14135, Algorithm 2 / FlashAttention-2 Algorithm 2)
// saves for backward Q, K, V, the output O and the row statistics (log-sum-exp L, fp32 per head per
// row); dropout is regenerated from the saved RNG state. Around it the layer keeps what the eager layer
// keeps outside the core: the attention and MLP norms' inputs and outputs, and the MLP's tensors.
TEST(ActivationModel, FlashWorkingSetIsThePapersSavedTensors) {
  ModelSpec m = test::llama3_8b();  // GQA, gated MLP
  m.attention = Attention::flash;
  m.attention_dropout = 0.1;
  m.hidden_dropout = 0;
  const Bytes s = 8192, b = 2, h = m.hidden, f = m.ffn_hidden, a = m.heads;
  const Bytes head_dim = h / a, kv_cols = m.kv_heads * head_dim, e = 2;
  const Bytes q = e * s * b * h, k = e * s * b * kv_cols, v = k, o = e * s * b * h, lse = 4 * a * s * b;
  const Bytes attn_norm_in = e * s * b * h, qkv_in = e * s * b * h;  // the norm's input and output
  const Bytes mlp_norm_in = e * s * b * h, mlp_in = e * s * b * h;
  const Bytes swiglu = 4 * e * s * b * f;  // gate, up, silu(gate), silu(gate) * up
  const Bytes norm_stats = 2 * (2 * 4 * s * b);  // each norm's fp32 mean and rstd per token
  EXPECT_EQ(layer_bytes(m, s, b),
            q + k + v + o + lse + attn_norm_in + qkv_in + mlp_norm_in + mlp_in + swiglu + norm_stats);
}

// A layer's working set (the recompute buffer, and under full checkpointing what its forward computes before it
// keeps only its input) is everything the layer keeps except its input, which the checkpoint holds.
TEST(ActivationModel, ALayersWorkingSetIsWhatItKeepsWithoutItsInput) {
  for (const Attention att : {Attention::eager, Attention::flash}) {
    ModelSpec m = test::llama2_7b();
    m.attention = att;
    const ActivationBytes a = activation_bytes(m, training(4096, 2, Checkpointing::full));
    EXPECT_EQ(a.per_layer_work_bytes + a.per_layer_checkpoint, a.per_layer_no_recompute);
    EXPECT_EQ(a.per_layer_checkpoint, 2 * 4096 * 2 * m.hidden);
  }
}

// The activation gradients a layer's backward holds (the residual stream's carries over to the next layer), tensor
// by tensor: the residual stream, a norm output, the attention output and dQ (T x h each), dK and dV (T x kv_dim),
// two T x ffn gradients in the MLP; eager: d(probs) (a s^2 b, d(scores) in place); flash: delta (fp32 per head and
// row) and FlashAttention-2's fp32 dQ accumulator (T x h).
TEST(ActivationModel, BackwardGradientsAreTheTensorsOneLayersBackwardHolds) {
  ModelSpec m = test::llama3_8b();  // GQA, gated MLP
  const Bytes s = 8192, b = 2, h = m.hidden, f = m.ffn_hidden, a = m.heads, e = 2, T = s * b;
  const Bytes kv_dim = m.kv_heads * (h / a);
  const Bytes common = 4 * e * T * h + 2 * e * T * kv_dim + 2 * e * T * f;
  m.attention = Attention::eager;
  EXPECT_EQ(activation_bytes(m, training(s, b)).backward_grad_bytes, common + e * a * s * s * b);
  m.attention = Attention::flash;
  EXPECT_EQ(activation_bytes(m, training(s, b)).backward_grad_bytes, common + 4 * a * s * b + 4 * T * h);
}

// Flash's backward gradients have no s^2 term (doubling the sequence doubles them); eager's d(probs) grows with s^2.
TEST(ActivationModel, FlashBackwardGradientsHaveNoQuadraticTermAndEagersGrowWithTheSquare) {
  ModelSpec m = test::llama2_7b();
  const Bytes s = 4096, b = 1, a = m.heads, e = 2;
  auto grads = [&](Bytes seq) { return activation_bytes(m, training(seq, b)).backward_grad_bytes; };
  m.attention = Attention::flash;
  EXPECT_EQ(grads(2 * s), 2 * grads(s));
  m.attention = Attention::eager;
  // (2s)^2 - 2 s^2 = 2 s^2 more than the linear terms' doubling.
  EXPECT_EQ(grads(2 * s) - 2 * grads(s), 2 * e * a * s * s * b);
}

// The head keeps the final norm's input (the last layer's output) and output, its fp32 statistics, and the logits in
// the training dtype with their fp32 copy for the loss.
TEST(ActivationModel, HeadKeepsTheFinalNormsTensorsAndTheLogitsWithTheirFp32Copy) {
  const ModelSpec m = test::llama2_7b();
  const Bytes s = 4096, b = 2, h = m.hidden, e = 2;
  EXPECT_EQ(activation_bytes(m, training(s, b)).head_bytes,
            2 * e * s * b * h + 2 * 4 * s * b + s * b * m.vocab * (e + 4));
}
