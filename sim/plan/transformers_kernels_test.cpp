// transformers' eager kernels under runtime deepspeed: what each unit's forward and backward move, and that the
// schedule charges them (in place of zrun's fused kernels) to the units that run them.
#include "sim/plan/transformers_kernels.hpp"

#include <gtest/gtest.h>

#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"

namespace zsim {
namespace {

const Op& compute_op(const Schedule& s, const std::string& name) {
  for (const Op& op : s.ops)
    if (op.kind == OpKind::compute && op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

// RMSNorm with its fp32 upcast: six kernels over the hidden states, 36 bytes an element at bf16.
TEST(TransformersKernels, RmsNormsForwardMovesThirtySixBytesAnElementAtBf16) {
  const ModelSpec m = test::small_llama(2);
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::final_norm, m, 2).forward, 36 * m.hidden);
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::final_norm, m, 2).backward, 76 * m.hidden);
  // Its output's gradient summed from q, k and v (two adds) / gate and up (one).
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::attn_norm, m, 2).backward, (76 + 12) * m.hidden);
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::mlp_norm, m, 2).backward, (76 + 6) * m.hidden);
}

// RoPE on q over all heads, on k over the kv heads only (grouped-query attention); v has none.
TEST(TransformersKernels, RopeMovesQOverItsHeadsAndKOverTheKvHeads) {
  ModelSpec m = test::small_llama(2);
  m.kv_heads = m.heads / 4;
  const Bytes head_dim = m.hidden / m.heads;
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::attn_q, m, 2).forward, 20 * m.hidden);
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::attn_k, m, 2).forward, 20 * m.kv_heads * head_dim);
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::attn_v, m, 2).forward, 0);
}

// The loss in fp32 over the vocabulary: forward the upcast and log_softmax, backward nll's zeroed gradient,
// log_softmax's and the cast back.
TEST(TransformersKernels, TheHeadsLossMovesTheLogitsInFp32) {
  const ModelSpec m = test::small_llama(2);
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::head, m, 2).forward, 14 * m.vocab);
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::head, m, 2).backward, 22 * m.vocab);
}

// The schedule charges them under runtime deepspeed, zrun's fused kernels under runtime zrun.
TEST(TransformersKernels, TheScheduleChargesThemUnderDeepSpeedOnly) {
  Scenario ds = test::scenario(test::small_llama(2), 2, 1, 1);
  ds.runtime = RuntimeKind::deepspeed;
  Scenario zr = ds;
  zr.runtime = RuntimeKind::zrun;
  const Schedule a = make_schedule(ds, make_plan(ds), 1), b = make_schedule(zr, make_plan(zr), 1);
  const Bytes tokens = ds.training.micro_batch * ds.training.seq_len;
  EXPECT_EQ(compute_op(a, "fwd.L0.attn.norm").compute.hbm_bytes, 36 * ds.model.hidden * tokens);
  EXPECT_EQ(compute_op(b, "fwd.L0.attn.norm").compute.hbm_bytes, 2 * 2 * ds.model.hidden * tokens);
  EXPECT_EQ(compute_op(a, "bwd.L1.mlp.up").compute.hbm_bytes, 18 * ds.model.ffn_hidden * tokens);
  EXPECT_GT(compute_op(a, "fwd.head").compute.hbm_bytes, compute_op(b, "fwd.head").compute.hbm_bytes);
}

// GPT-2: LayerNorm is one fused kernel; gelu_new's eight ops over the MLP's width.
TEST(TransformersKernels, Gpt2sLayerNormIsFusedAndItsGeluIsEightOps) {
  ModelSpec m = test::small_llama(2);
  m.mlp = MlpKind::plain;
  m.bias = true;
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::attn_norm, m, 2).forward, 4 * m.hidden);
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::mlp_up, m, 2).forward, 36 * m.ffn_hidden);
  EXPECT_EQ(transformers_unit_bytes_per_token(ModelUnitKind::attn_q, m, 2).forward, 0);
}


// Eager attention's scores as transformers runs them: Llama's softmax in fp32 and its cast back (8e + 8 forward,
// 8e + 12 backward per score at bf16: 24 and 28 bytes), GPT-2's in the training dtype (8e, 9e), dropout's kernel only
// above p = 0.
TEST(TransformersKernels, EagerScoresCarryTheScaleTheMaskAndTheSoftmaxsCasts) {
  TrainingSpec t;
  t.micro_batch = 2;
  t.seq_len = 64;
  ModelSpec m = test::small_llama(2);
  m.attention = Attention::eager;
  const Bytes n = m.heads * 64 * 64 * 2;
  EXPECT_EQ(transformers_eager_scores_bytes(m, t).forward, 24 * n);
  EXPECT_EQ(transformers_eager_scores_bytes(m, t).backward, 28 * n);
  m.mlp = MlpKind::plain;
  EXPECT_EQ(transformers_eager_scores_bytes(m, t).forward, 16 * n);
  EXPECT_EQ(transformers_eager_scores_bytes(m, t).backward, 18 * n);
  m.attention_dropout = 0.1;
  EXPECT_EQ(transformers_eager_scores_bytes(m, t).forward, (16 + 5) * n);
  EXPECT_EQ(transformers_eager_scores_bytes(m, t).backward, (18 + 5) * n);
}

TEST(TransformersKernels, FlashAttentionKeepsNoScores) {
  TrainingSpec t;
  const ModelSpec m = test::small_llama(2);
  EXPECT_EQ(transformers_eager_scores_bytes(m, t).forward, 0);
  EXPECT_EQ(transformers_eager_scores_bytes(m, t).backward, 0);
}

// The schedule's attention core: transformers' scores under runtime deepspeed, zrun's fused softmax under zrun.
TEST(TransformersKernels, TheAttentionCoreCarriesTransformersScoresUnderDeepSpeedOnly) {
  Scenario ds = test::scenario(test::small_llama(2), 2, 1, 1);
  ds.model.attention = Attention::eager;
  ds.runtime = RuntimeKind::deepspeed;
  Scenario zr = ds;
  zr.runtime = RuntimeKind::zrun;
  const Schedule a = make_schedule(ds, make_plan(ds), 1), b = make_schedule(zr, make_plan(zr), 1);
  const Bytes tokens = ds.training.micro_batch * ds.training.seq_len;
  const Bytes own = transformers_unit_bytes_per_token(ModelUnitKind::attn_o, ds.model, 2).forward * tokens;
  EXPECT_EQ(compute_op(a, "fwd.L0.attn.o").compute.hbm_bytes,
            own + transformers_eager_scores_bytes(ds.model, ds.training).forward);
  EXPECT_GE(compute_op(b, "fwd.L0.attn.o").compute.hbm_bytes, attention_scores_hbm_bytes(ds.model, ds.training).forward);
  EXPECT_LT(compute_op(b, "fwd.L0.attn.o").compute.hbm_bytes, compute_op(a, "fwd.L0.attn.o").compute.hbm_bytes);
}

}  // namespace
}  // namespace zsim
