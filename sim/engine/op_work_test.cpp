// How a GPU compute op's FLOPs and HBM bytes combine into its time.
#include <gtest/gtest.h>

#include "cost_models/compute_cost.hpp"
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

TEST(OpWork, ADeviceCopyRunsAtTheCopyKindsEfficiency) {
  ClusterSpec c = test_cluster(1, 1);
  c.efficiency.hbm_by_kind.copy = 0.5;
  ScheduleBuilder b(c);
  b.copy("d2d", Phase::backward, CopyKind::d2d, 1'000'000'000);
  const double expected = 2 * memory_bound_s(1'000'000'000, c.gpu.hbm_GBps, 0.5);
  EXPECT_NEAR(simulate(c, b.s).step_s(), expected, expected * 1e-12);
}

}  // namespace
}  // namespace zsim
