// The attention core's FLOPs and its scores' HBM traffic, and how the schedule charges them to the attn.o unit.
#include "sim/plan/attention_flops.hpp"

#include <gtest/gtest.h>

#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"

using namespace zsim;

namespace {
Scenario eager_scenario(double attention_dropout = 0) {
  Scenario s = test::scenario(test::small_llama(2), 0, 1, 1);
  s.model.attention = Attention::eager;
  s.model.attention_dropout = attention_dropout;
  return s;
}
const Op& compute_op(const Schedule& sch, const std::string& name) {
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.name == name) return op;
  throw std::runtime_error("no op " + name);
}
}  // namespace

TEST(AttentionScoresBytes, EagerWritesReadsTheScoresFourTimesForwardSevenBackward) {
  const Scenario s = eager_scenario();
  const Bytes n = s.model.heads * s.training.seq_len * s.training.seq_len * s.training.micro_batch;
  const AttentionScoresBytes b = attention_scores_hbm_bytes(s.model, s.training);
  EXPECT_EQ(b.forward, 4 * 2 * n);
  EXPECT_EQ(b.backward, 7 * 2 * n);
}

TEST(AttentionScoresBytes, AttentionDropoutAddsItsKernelAndMask) {
  const Scenario s = eager_scenario(0.1);
  const Bytes n = s.model.heads * s.training.seq_len * s.training.seq_len * s.training.micro_batch;
  const AttentionScoresBytes b = attention_scores_hbm_bytes(s.model, s.training);
  EXPECT_EQ(b.forward, 4 * 2 * n + 5 * n);
  EXPECT_EQ(b.backward, 7 * 2 * n + 5 * n);
}

TEST(AttentionScoresBytes, FlashKeepsNoScoresInHbm) {
  Scenario s = eager_scenario();
  s.model.attention = Attention::flash;
  const AttentionScoresBytes b = attention_scores_hbm_bytes(s.model, s.training);
  EXPECT_EQ(b.forward, 0);
  EXPECT_EQ(b.backward, 0);
}

// zrun's layers (runtime zrun): the scores' bytes are the attention core unit's only memory-bound traffic.
TEST(AttentionScoresBytes, ScheduleChargesThemToTheAttentionCoreUnitOnly) {
  Scenario s = eager_scenario();
  s.runtime = RuntimeKind::zrun;
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  const AttentionScoresBytes b = attention_scores_hbm_bytes(s.model, s.training);
  EXPECT_EQ(compute_op(sch, "fwd.L0.attn.o").compute.hbm_bytes, b.forward);
  EXPECT_EQ(compute_op(sch, "bwd.L0.attn.o").compute.hbm_bytes, b.backward);
  EXPECT_EQ(compute_op(sch, "fwd.L0.attn.q").compute.hbm_bytes, 0);
  Scenario flash = s;
  flash.model.attention = Attention::flash;
  const Schedule fs = make_schedule(flash, make_plan(flash), 1);
  EXPECT_EQ(compute_op(fs, "fwd.L0.attn.o").compute.hbm_bytes, 0);
}

TEST(AttentionCoreGemmCalls, EagerIsOneBatchedCallPerSequenceAndQueryHeadOfAGroupForEachProduct) {
  // runtime/model/attention.cu: per sequence and query head r of a kv group, one strided-batched call over the kv
  // heads: forward scores (s, s, d) and P V (d, s, s); backward d(probs) (s, s, d), dV, dQ, dK (d, s, s).
  Scenario s = eager_scenario();
  s.model.heads = 8, s.model.kv_heads = 2;  // groups of 4 query heads, head dim 512 / 8
  s.training.micro_batch = 3;
  const AttentionGemmCalls c = attention_core_gemm_calls(s.model, s.training);
  const GemmCalls scores{1024, 1024, 64, 2, 12}, by_values{64, 1024, 1024, 2, 12};
  EXPECT_EQ(c.forward, (std::vector<GemmCalls>{scores, by_values}));
  EXPECT_EQ(c.backward, (std::vector<GemmCalls>{scores, by_values, by_values, by_values}));
}

TEST(AttentionCoreGemmCalls, TheirFlopsAreTheCoresFlops) {
  Scenario s = eager_scenario();
  s.model.kv_heads = 4;
  s.training.micro_batch = 2;
  auto flops = [](const std::vector<GemmCalls>& v) {
    double f = 0;
    for (const GemmCalls& c : v) f += 2.0 * c.m * c.n * c.k * c.batch * c.calls;
    return f;
  };
  const AttentionGemmCalls c = attention_core_gemm_calls(s.model, s.training);
  EXPECT_DOUBLE_EQ(flops(c.forward), attention_core_flops(s.model, s.training).forward);
  EXPECT_DOUBLE_EQ(flops(c.backward), attention_core_flops(s.model, s.training).backward);
}

TEST(AttentionCoreGemmCalls, FlashHasNone) {
  Scenario s = eager_scenario();
  s.model.attention = Attention::flash;
  const AttentionGemmCalls c = attention_core_gemm_calls(s.model, s.training);
  EXPECT_TRUE(c.forward.empty());
  EXPECT_TRUE(c.backward.empty());
}

TEST(AttentionScoresBytes, TheGemmsMoveTwoOfTheFourForwardAndFourOfTheSevenBackward) {
  // Forward: Q K^T writes the scores, P V reads them (the softmax's 2 are its own); backward: dout V^T writes
  // d(probs), probs^T dout reads probs, the dQ and dK products read d(scores) (the softmax backward's 3 its own).
  const Scenario s = eager_scenario(0.1);
  const Bytes n = s.model.heads * s.training.seq_len * s.training.seq_len * s.training.micro_batch;
  const AttentionScoresBytes b = attention_scores_hbm_bytes(s.model, s.training);
  EXPECT_EQ(b.forward_gemm, 2 * 2 * n);
  EXPECT_EQ(b.backward_gemm, 4 * 2 * n);
}

TEST(AttentionCoreGemmCalls, TheScheduleGivesThemToAttnOWithTheirShareOfTheScoresBytes) {
  Scenario s = eager_scenario();
  s.training.activation_checkpointing = Checkpointing::full;
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  const AttentionGemmCalls calls = attention_core_gemm_calls(s.model, s.training);
  const AttentionScoresBytes b = attention_scores_hbm_bytes(s.model, s.training);
  for (const ModelUnit& u : sch.model.units) {
    const bool core = u.name == "L0.attn.o" || u.name == "L1.attn.o";
    EXPECT_EQ(u.forward_gemms, core ? calls.forward : std::vector<GemmCalls>{}) << u.name;
    EXPECT_EQ(u.backward_gemms, core ? calls.backward : std::vector<GemmCalls>{}) << u.name;
  }
  EXPECT_EQ(compute_op(sch, "fwd.L0.attn.o").compute.gemm_hbm_bytes, b.forward_gemm);
  EXPECT_EQ(compute_op(sch, "recompute.L0").compute.gemm_hbm_bytes, b.forward_gemm);
  Bytes backward = 0;  // a backward cut into parts shares them out
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.name.rfind("bwd.L0.attn.o", 0) == 0) backward += op.compute.gemm_hbm_bytes;
  EXPECT_NEAR(static_cast<double>(backward), static_cast<double>(b.backward_gemm), 2.0);
  EXPECT_EQ(compute_op(sch, "fwd.L0.attn.q").compute.gemm_hbm_bytes, 0);
}
