// How a GPU compute op's FLOPs and HBM bytes combine into its time.
#include <gtest/gtest.h>

#include "cost_models/compute_cost.hpp"
#include "cost_models/gemm_model.hpp"
#include "cost_models/transfer_cost.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/engine/test_schedules.hpp"

namespace zsim {
namespace {

using testing::ScheduleBuilder;
using testing::test_cluster;

double one_op_step_s(ComputeKind what, Flops flops, Bytes hbm_bytes) {
  const ClusterSpec c = test_cluster(1, 1);
  ScheduleBuilder b(c);
  const OpId id = b.compute("op", what == ComputeKind::optimizer ? Phase::step : Phase::forward, flops, {}, "compute", what);
  b.s.ops[id].compute.hbm_bytes = hbm_bytes;
  return simulate(c, b.s).step_s();
}

TEST(OpWork, ForwardGemmsAndMemoryBoundKernelsAddUp) {
  const ClusterSpec c = test_cluster(1, 1);
  const Flops flops = 1e12;
  const Bytes bytes = 3'000'000'000;
  const double expected = gemm_s(flops, c.gpu.peak_tflops, c.efficiency.gemm) +
                          memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_NEAR(one_op_step_s(ComputeKind::forward, flops, bytes), expected, expected * 1e-12);
  EXPECT_NEAR(one_op_step_s(ComputeKind::backward, flops, bytes), expected, expected * 1e-12);
}

TEST(OpWork, AnOptimizerStepIsOneKernelBoundByTheSlowerOfFlopsAndBytes) {
  const ClusterSpec c = test_cluster(1, 1);
  const Flops flops = 1e9;
  const Bytes bytes = 3'000'000'000;
  const double expected = memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_NEAR(one_op_step_s(ComputeKind::optimizer, flops, bytes), expected, expected * 1e-12);
}

TEST(OpWork, WithoutPerKindKeysEveryMemoryBoundKindRunsAtEfficiencyHbm) {
  ClusterSpec c = test_cluster(1, 1);
  const Bytes bytes = 3'000'000'000;
  auto step = [&](const ClusterSpec& cl, ComputeKind what) {
    ScheduleBuilder b(cl);
    const OpId id = b.compute("op", what == ComputeKind::optimizer ? Phase::step : Phase::forward, 0, {}, "compute", what);
    b.s.ops[id].compute.hbm_bytes = bytes;
    return simulate(cl, b.s).step_s();
  };
  const double at_hbm = memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::optimizer), at_hbm);
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::quantize), at_hbm);
  c.efficiency.hbm_by_kind.adam = 0.4;
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::optimizer), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.4));
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::quantize), at_hbm);  // its own kind not given: efficiency.hbm
  c.efficiency.hbm_by_kind.quantize = 0.2;
  EXPECT_DOUBLE_EQ(step(c, ComputeKind::quantize), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.2));
}

// NCCL with one rank (enqueue.cc -> ncclLaunchOneRank) copies an out-of-place buffer or runs its averaging kernel
// over it: every collective of a one-rank group reads and writes its bytes once, as a device copy.
TEST(OpWork, AOneRankCollectiveCostsADeviceCopyOfItsBytes) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.hbm_by_kind.copy = 0.5;
  const double expected = device_copy_s(1'000'000'000, c.gpu.hbm_GBps, 0.5);
  for (const CollectiveKind what : {CollectiveKind::all_reduce, CollectiveKind::all_gather,
                                    CollectiveKind::reduce_scatter}) {
    ScheduleBuilder b(c);
    const int one = b.group("one", 1, 1);
    b.collective("c", Phase::backward, what, one, 1'000'000'000);
    EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-12);
  }
}

// A d2d copy (a flatten, a copy-out, a dtype cast) is one kernel: its launch, then its bytes read and written at
// the copy kind's efficiency.
TEST(OpWork, ADeviceCopyIsOneKernelLaunchAndItsBytesAtTheCopyKindsEfficiency) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.hbm_by_kind.copy = 0.5;
  c.efficiency.launch_us = 5;
  ScheduleBuilder b(c);
  b.copy("d2d", Phase::backward, CopyKind::d2d, 1'000'000'000);
  const double expected = 2 * memory_bound_s(1'000'000'000, c.gpu.hbm_GBps, 0.5) + 5e-6;
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-12);
}

// A schedule model of a few units, as zsim plan writes it: micro-batch 2 x 1024 tokens, hidden 512, vocab 1000.
ScheduleModel small_model() {
  ScheduleModel m;
  m.layers = 1, m.hidden = 512, m.ffn_hidden = 1024, m.heads = 8, m.kv_heads = 8, m.vocab = 1000;
  m.micro_batch = 2, m.seq_len = 1024;
  m.units = {{"L0.attn.norm", 0, {{"attn.norm", 512, 0}}},
             {"L0.attn.q", 0, {{"attn.q", 512, 512}}},
             {"L0.attn.o", 0, {{"attn.o", 512, 512}}},
             {"head", -1, {{"head.out", 512, 1000}}},
             {"L0.mlp.up", 0, {{"mlp.up", 512, 1024}}, "activation"}};
  return m;
}

// One forward op of unit `unit` alone in a step.
double unit_op_s(const ClusterSpec& c, int unit, Flops flops, Bytes hbm_bytes, int launches) {
  ScheduleBuilder b(c);
  b.s.model = small_model();
  const OpId id = b.compute("fwd", Phase::forward, flops);
  b.s.ops[id].unit = unit;
  b.s.ops[id].compute.hbm_bytes = hbm_bytes;
  b.s.ops[id].compute.kernel_launches = launches;
  return simulate(c, b.s).step_s();
}

TEST(OpWork, EveryKernelLaunchCostsLaunchUsWithoutAGemmModel) {
  ClusterSpec c = test_cluster(1, 1);
  const Flops flops = 1e10;
  const double gemm = gemm_s(flops, c.gpu.peak_tflops, c.efficiency.gemm);
  EXPECT_NEAR(unit_op_s(c, 1, flops, 0, 3), gemm, gemm * 1e-12);  // launch_us 0: launches cost nothing
  c.efficiency.launch_us = 4;
  EXPECT_NEAR(unit_op_s(c, 1, flops, 0, 3), gemm + 3 * 4e-6, gemm * 1e-12);  // the GEMM's own launch too
  EXPECT_NEAR(unit_op_s(c, 1, flops, 0, 0), gemm, gemm * 1e-12);             // none given: none charged
  const double norm = memory_bound_s(1'000'000, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_NEAR(unit_op_s(c, 0, 0, 1'000'000, 1), norm + 4e-6, norm * 1e-12);  // a norm: one kernel
}

TEST(OpWork, TheGemmCallsTheGemmModelPricesAreNotChargedALaunchAgain) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.gemm_model.launch_us = 7;
  c.efficiency.gemm_model.max_efficiency = 0.8;
  c.efficiency.launch_us = 3;
  // attn.q's forward: one GEMM (2048 tokens x 512 x 512), priced by the model with its own 7 us launch.
  const Flops flops = 2.0 * 2048 * 512 * 512;
  const double model = gemm_model_s(2048, 512, 512, 1, 2, c.gpu.peak_tflops, c.efficiency.gemm_model);
  EXPECT_NEAR(unit_op_s(c, 1, flops, 0, 1), model, model * 1e-9);
  // attn.o with the eager core: its GEMM (priced by the model) and 9 more launches (core GEMM calls, softmax).
  EXPECT_NEAR(unit_op_s(c, 2, flops, 0, 10), model + 9 * 3e-6, model * 1e-9);
  // Without a model every launch, the GEMM's too, is charged launch_us.
  c.efficiency.gemm_model.max_efficiency = 0;
  const double constant = gemm_s(flops, c.gpu.peak_tflops, c.efficiency.gemm);
  EXPECT_NEAR(unit_op_s(c, 2, flops, 0, 10), constant + 10 * 3e-6, constant * 1e-9);
}

TEST(OpWork, AnActivationUnitsBytesRunAtTheActivationKind) {
  ClusterSpec c = test_cluster(1, 1);
  const Bytes bytes = 2'000'000'000;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 4, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm));
  c.efficiency.hbm_by_kind.activation = 0.3;
  c.efficiency.hbm_by_kind.softmax = 0.6;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 4, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.3));
}

// A recompute runs its layer's forward: the norms' bytes (2 x tokens x hidden x e each) at `norm`, the MLP
// activation's forward (SwiGLU: 3 x tokens x ffn x e) at `activation`, the rest (eager scores) at `softmax`.
TEST(OpWork, ARecomputeSplitsItsBytesIntoNormsActivationAndScores) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.hbm_by_kind.norm = 0.5;
  c.efficiency.hbm_by_kind.activation = 0.3;
  c.efficiency.hbm_by_kind.softmax = 0.6;
  ScheduleBuilder b(c);
  b.s.model = small_model();
  const Bytes norms = 2 * 2048 * 512 * 2, activation = 3 * 2048 * 1024 * 2, scores = 100'000'000;
  const OpId id = b.compute("recompute", Phase::backward, 0, {}, "compute", ComputeKind::recompute);
  b.s.ops[id].layer = 0;
  b.s.ops[id].compute.hbm_bytes = norms + activation + scores;
  const double expected = memory_bound_s(norms, c.gpu.hbm_GBps, 0.5) + memory_bound_s(activation, c.gpu.hbm_GBps, 0.3) +
                          memory_bound_s(scores, c.gpu.hbm_GBps, 0.6);
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-12);
}

TEST(OpWork, ScoresRunAtTheSoftmaxKindAndTheHeadsLossAtTheCrossEntropyKind) {
  ClusterSpec c = test_cluster(1, 1);
  const Bytes bytes = 2'000'000'000;
  const double at_hbm = memory_bound_s(bytes, c.gpu.hbm_GBps, c.efficiency.hbm);
  EXPECT_DOUBLE_EQ(unit_op_s(c, 2, 0, bytes, 0), at_hbm);  // no per-kind keys: efficiency.hbm
  EXPECT_DOUBLE_EQ(unit_op_s(c, 3, 0, bytes, 0), at_hbm);
  c.efficiency.hbm_by_kind.cross_entropy = 0.2;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 2, 0, bytes, 0), at_hbm);  // the scores are not the loss
  EXPECT_DOUBLE_EQ(unit_op_s(c, 3, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.2));
  c.efficiency.hbm_by_kind.softmax = 0.6;
  EXPECT_DOUBLE_EQ(unit_op_s(c, 2, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.6));
  EXPECT_DOUBLE_EQ(unit_op_s(c, 3, 0, bytes, 0), memory_bound_s(bytes, c.gpu.hbm_GBps, 0.2));
}

}  // namespace
}  // namespace zsim
