// Kernel launches per unit as zrun's model runs them (runtime/model/*.cu, model.cpp), and how the schedule builder
// writes them into the forward, backward and recompute ops.
#include "sim/plan/kernel_launches.hpp"

#include <gtest/gtest.h>

#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"

using namespace zsim;

namespace {
Scenario eager(int micro_batch = 4) {
  Scenario s = test::scenario(test::small_llama(2), 0, 1, 1);
  s.model.attention = Attention::eager;
  s.training.micro_batch = micro_batch;
  return s;
}
UnitKernelLaunches of(ModelUnitKind k, const Scenario& s) { return unit_kernel_launches(k, s.model, s.training); }
const Op& compute_op(const Schedule& sch, const std::string& name) {
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.name == name) return op;
  throw std::runtime_error("no op " + name);
}
}  // namespace

TEST(KernelLaunches, UnitKindsByPlanName) {
  EXPECT_EQ(model_unit_kind("embedding"), ModelUnitKind::embedding);
  EXPECT_EQ(model_unit_kind("L0.attn.norm"), ModelUnitKind::attn_norm);
  EXPECT_EQ(model_unit_kind("L12.attn.o"), ModelUnitKind::attn_o);
  EXPECT_EQ(model_unit_kind("L3.mlp.gate"), ModelUnitKind::mlp_gate);
  EXPECT_EQ(model_unit_kind("L3.mlp.down"), ModelUnitKind::mlp_down);
  EXPECT_EQ(model_unit_kind("final.norm"), ModelUnitKind::final_norm);
  EXPECT_EQ(model_unit_kind("head"), ModelUnitKind::head);
  EXPECT_FALSE(model_unit_kind("L.attn.q"));
  EXPECT_FALSE(model_unit_kind("Lx.attn.q"));
  EXPECT_FALSE(model_unit_kind("L1.attn.qkv"));
  EXPECT_FALSE(model_unit_kind("optimizer"));
}

TEST(KernelLaunches, EagerAttentionLaunchesTwoGemmsPerSequenceForwardFourBackwardPlusTheSoftmax) {
  // Multi-head (kv_heads = heads): one strided-batched call per sequence for each product.
  const Scenario s = eager(4);
  const UnitKernelLaunches o = of(ModelUnitKind::attn_o, s);
  EXPECT_EQ(o.forward, 1 + 2 * 4 + 1);    // o's GEMM, QK^T and PV per sequence, the causal softmax
  EXPECT_EQ(o.backward, 2 + 4 * 4 + 1);   // o's two GEMMs, four per sequence, the softmax backward
  EXPECT_EQ(o.recompute, o.forward);
  // Grouped-query attention: one call per sequence and query head of a kv group.
  Scenario gqa = eager(2);
  gqa.model.heads = 8, gqa.model.kv_heads = 2;
  EXPECT_EQ(of(ModelUnitKind::attn_o, gqa).forward, 1 + 2 * 2 * 4 + 1);
  EXPECT_EQ(of(ModelUnitKind::attn_o, gqa).backward, 2 + 4 * 2 * 4 + 1);
}

TEST(KernelLaunches, FlashAttentionIsOneKernelForwardFourBackward) {
  Scenario s = eager(4);
  s.model.attention = Attention::flash;
  EXPECT_EQ(of(ModelUnitKind::attn_o, s).forward, 2);
  EXPECT_EQ(of(ModelUnitKind::attn_o, s).backward, 2 + 4);
}

TEST(KernelLaunches, LinearNormAndMlpUnits) {
  const Scenario s = eager();
  for (ModelUnitKind k : {ModelUnitKind::attn_q, ModelUnitKind::attn_k, ModelUnitKind::attn_v}) {
    EXPECT_EQ(of(k, s).forward, 1);
    EXPECT_EQ(of(k, s).backward, 2);
    EXPECT_EQ(of(k, s).recompute, 1);
  }
  EXPECT_EQ(of(ModelUnitKind::attn_norm, s).forward, 1);
  EXPECT_EQ(of(ModelUnitKind::attn_norm, s).backward, 3);
  EXPECT_EQ(of(ModelUnitKind::mlp_up, s).forward, 2);     // GEMM + SwiGLU
  EXPECT_EQ(of(ModelUnitKind::mlp_up, s).backward, 3);    // SwiGLU's up half + two GEMMs
  EXPECT_EQ(of(ModelUnitKind::mlp_gate, s).backward, 3);  // SwiGLU's gate half + two GEMMs
  EXPECT_EQ(of(ModelUnitKind::mlp_down, s).forward, 1);
  EXPECT_EQ(of(ModelUnitKind::mlp_down, s).recompute, 0);  // zrun's recompute skips it
  EXPECT_EQ(of(ModelUnitKind::head, s).forward, 4);
  EXPECT_EQ(of(ModelUnitKind::head, s).backward, 3);
  EXPECT_EQ(of(ModelUnitKind::final_norm, s).recompute, 0);
}

TEST(KernelLaunches, BiasesAddTheirColumnSums) {
  Scenario s = eager();
  s.model.bias = true;
  EXPECT_EQ(of(ModelUnitKind::attn_q, s).backward, 2 + 2);
  EXPECT_EQ(of(ModelUnitKind::attn_q, s).forward, 1);  // the bias is the GEMM's epilogue
  EXPECT_EQ(of(ModelUnitKind::mlp_norm, s).backward, 4);
  EXPECT_EQ(of(ModelUnitKind::head, s).backward, 3);  // the head has no bias
}

TEST(KernelLaunches, EmbeddingBackwardSortsInOneTileUpToCubsTileSize) {
  Scenario s = eager(4);  // 4 x 1024 tokens: one tile
  EXPECT_EQ(of(ModelUnitKind::embedding, s).forward, 1);
  EXPECT_EQ(of(ModelUnitKind::embedding, s).backward, 1 + 1 + 1);
  s.training.micro_batch = 8;  // 8192 tokens: onesweep, four 8-bit passes
  EXPECT_EQ(of(ModelUnitKind::embedding, s).backward, 1 + 12 + 1);
  s.model.max_position_embeddings = 2048;
  EXPECT_EQ(of(ModelUnitKind::embedding, s).backward, 1 + 12 + 1 + 1);
}

TEST(KernelLaunches, ScheduleOpsCarryTheirUnitsLaunches) {
  const Scenario s = eager(4);
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  EXPECT_EQ(compute_op(sch, "fwd.L0.attn.o").compute.kernel_launches, 10);
  EXPECT_EQ(compute_op(sch, "bwd.L0.attn.o").compute.kernel_launches, 19);
  EXPECT_EQ(compute_op(sch, "fwd.L1.mlp.up").compute.kernel_launches, 2);
  EXPECT_EQ(compute_op(sch, "fwd.head").compute.kernel_launches, 4);
  EXPECT_EQ(compute_op(sch, "bwd.embedding").compute.kernel_launches, 3);
  // A step's forward launches every unit's forward once; the optimizer carries none.
  int forward = 0, expected = 0;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.compute.what == ComputeKind::forward) forward += op.compute.kernel_launches;
  const Plan plan = make_plan(s);
  for (const FetchUnit& u : plan.units) expected += of(*model_unit_kind(u.name), s).forward;
  EXPECT_EQ(forward, expected);
  EXPECT_EQ(expected, 1 + 2 * (1 + 3 + 10 + 1 + 1 + 2 + 1) + 1 + 4);
  for (const Op& op : sch.ops) {
    if (op.kind == OpKind::compute && op.compute.what == ComputeKind::optimizer) {
      EXPECT_EQ(op.compute.kernel_launches, 0);
    }
  }
}

TEST(KernelLaunches, RecomputeLaunchesItsLayersUnitsWithoutTheDownProjection) {
  Scenario s = eager(4);
  s.training.activation_checkpointing = Checkpointing::full;
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  // norm, q, k, v, o with the core (1 + 8 + 1), norm, gate, up + SwiGLU; not down.
  EXPECT_EQ(compute_op(sch, "recompute.L1").compute.kernel_launches, 1 + 3 + 10 + 1 + 1 + 2);
}

TEST(KernelLaunches, ABackwardCutIntoPartsLaunchesInItsFirstPart) {
  // Stage 2 with biases and a reduce bucket smaller than a weight: buckets close between a unit's bias and its
  // weight, cutting its backward into parts.
  Scenario s = test::scenario(test::small_llama(2), 2, 1, 2);
  s.model.bias = true;
  s.zero.reduce_bucket_size = 1000;
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  int parts = 0;
  for (const Op& op : sch.ops) {
    if (op.kind != OpKind::compute || op.name.find(".part") == std::string::npos) continue;
    ++parts;
    const bool first = op.name.ends_with(".part0");
    if (first)
      EXPECT_EQ(op.compute.kernel_launches, of(*model_unit_kind(sch.model.units.at(op.unit).name), s).backward) << op.name;
    else
      EXPECT_EQ(op.compute.kernel_launches, 0) << op.name;
  }
  EXPECT_GT(parts, 0);
}
