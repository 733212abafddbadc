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

TEST(AttentionScoresBytes, ScheduleChargesThemToTheAttentionCoreUnitOnly) {
  const Scenario s = eager_scenario();
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
