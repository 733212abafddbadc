// The MLP's elementwise activation (runtime/model/mlp.cu) in the schedule: the bytes its kernels move, charged to
// the unit that runs them, and the kind of memory-bound kernel each unit's bytes are (ModelUnit::hbm_kind).
#include <gtest/gtest.h>

#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"

using namespace zsim;

namespace {
const Op& compute_op(const Schedule& sch, const std::string& name) {
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.name == name) return op;
  throw std::runtime_error("no op " + name);
}
Scenario mlp_scenario(MlpKind mlp, bool checkpointing = false) {
  Scenario s = test::scenario(test::small_llama(2), 0, 1, 1);
  s.model.mlp = mlp;
  s.training.micro_batch = 2;
  if (checkpointing) s.training.activation_checkpointing = Checkpointing::full;
  else s.training.activation_checkpointing = Checkpointing::none;
  return s;
}
// The hbm_kind the schedule gives unit `name`.
std::string kind_of(const Schedule& sch, const std::string& name) {
  for (const ModelUnit& u : sch.model.units)
    if (u.name == name) return u.hbm_kind;
  throw std::runtime_error("no unit " + name);
}
}  // namespace

// Units of T x f elements (tokens 2 x 1024, ffn 1024, bf16): SwiGLU forward reads gate and up and writes act (3);
// backward the up half reads d(act) and gate and writes d(up) (3), the gate half reads d(act), gate and up and
// writes d(gate) (4).
// zrun's fused activation kernels (runtime zrun; runtime deepspeed: transformers_kernels_test.cpp).
TEST(MlpActivation, SwigluChargesItsKernelsBytesToMlpUpAndMlpGate) {
  Scenario s = mlp_scenario(MlpKind::gated);
  s.runtime = RuntimeKind::zrun;
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  const Bytes tf = 2 * 1024 * 1024 * 2;
  EXPECT_EQ(compute_op(sch, "fwd.L0.mlp.up").compute.hbm_bytes, 3 * tf);
  EXPECT_EQ(compute_op(sch, "fwd.L0.mlp.gate").compute.hbm_bytes, 0);
  EXPECT_EQ(compute_op(sch, "bwd.L0.mlp.up").compute.hbm_bytes, 3 * tf);
  EXPECT_EQ(compute_op(sch, "bwd.L0.mlp.gate").compute.hbm_bytes, 4 * tf);
  EXPECT_EQ(compute_op(sch, "fwd.L0.mlp.down").compute.hbm_bytes, 0);
}

// GeLU: forward reads up and writes act (2); backward reads d(act) and up and writes d(up) (3); no gate unit.
TEST(MlpActivation, GeluChargesItsKernelsBytesToMlpUp) {
  Scenario s = mlp_scenario(MlpKind::plain);
  s.runtime = RuntimeKind::zrun;
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  const Bytes tf = 2 * 1024 * 1024 * 2;
  EXPECT_EQ(compute_op(sch, "fwd.L1.mlp.up").compute.hbm_bytes, 2 * tf);
  EXPECT_EQ(compute_op(sch, "bwd.L1.mlp.up").compute.hbm_bytes, 3 * tf);
}

TEST(MlpActivation, ARecomputeMovesItsLayersActivationForwardBytesToo) {
  const Scenario plain = mlp_scenario(MlpKind::gated), ckpt = mlp_scenario(MlpKind::gated, true);
  const Schedule a = make_schedule(plain, make_plan(plain), 1), b = make_schedule(ckpt, make_plan(ckpt), 1);
  Bytes forward_l0 = 0;
  for (const Op& op : a.ops)
    if (op.kind == OpKind::compute && op.layer == 0 && op.phase == Phase::forward) forward_l0 += op.compute.hbm_bytes;
  int recomputes = 0;
  for (const Op& op : b.ops)
    if (op.kind == OpKind::compute && op.compute.what == ComputeKind::recompute && op.layer == 0) {
      EXPECT_EQ(op.compute.hbm_bytes, forward_l0) << op.name;
      ++recomputes;
    }
  EXPECT_EQ(recomputes, 1);
  EXPECT_GE(forward_l0, 3 * 2 * 1024 * 1024 * 2);  // the activation's forward is part of it
}

TEST(MlpActivation, EachUnitNamesTheKindOfItsMemoryBoundKernels) {
  Scenario s = mlp_scenario(MlpKind::gated);
  s.runtime = RuntimeKind::zrun;
  s.model.attention = Attention::eager;
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  EXPECT_EQ(kind_of(sch, "embedding"), "copy");
  EXPECT_EQ(kind_of(sch, "L0.attn.norm"), "norm");
  EXPECT_EQ(kind_of(sch, "L0.attn.q"), "");
  EXPECT_EQ(kind_of(sch, "L0.attn.o"), "softmax");
  EXPECT_EQ(kind_of(sch, "L0.mlp.gate"), "activation");
  EXPECT_EQ(kind_of(sch, "L0.mlp.up"), "activation");
  EXPECT_EQ(kind_of(sch, "L0.mlp.down"), "");
  EXPECT_EQ(kind_of(sch, "head"), "cross_entropy");
  s.model.attention = Attention::flash;  // one fused kernel: no memory-bound scores
  const Schedule flash = make_schedule(s, make_plan(s), 1);
  for (const ModelUnit& u : flash.model.units)
    if (u.name == "L0.attn.o") EXPECT_EQ(u.hbm_kind, "");
}

// Under DeepSpeed the units without a kind of their own carry transformers' elementwise ops (RoPE, the heads' merge
// copy, the residual adds: transformers_kernels.hpp), torch's vectorized elementwise kernels as the activation's.
TEST(MlpActivation, UnderDeepSpeedTheUnitsWithoutAKindRunAsTheActivations) {
  Scenario s = mlp_scenario(MlpKind::gated);
  s.runtime = RuntimeKind::deepspeed;
  s.model.attention = Attention::flash;
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  EXPECT_EQ(kind_of(sch, "L0.attn.q"), "activation");
  EXPECT_EQ(kind_of(sch, "L0.attn.o"), "activation");
  EXPECT_EQ(kind_of(sch, "L0.mlp.down"), "activation");
  EXPECT_EQ(kind_of(sch, "L0.attn.norm"), "norm");
  EXPECT_EQ(kind_of(sch, "head"), "cross_entropy");
}
