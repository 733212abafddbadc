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

}  // namespace
}  // namespace zsim
