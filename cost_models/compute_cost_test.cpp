// Compute cost models against FLOPs / (peak x efficiency) and bytes / (bandwidth x efficiency).
#include "cost_models/compute_cost.hpp"

#include <gtest/gtest.h>

namespace zsim {
namespace {

TEST(GemmCost, IsFlopsOverAchievedPeak) {
  // 1 PFLOP at 989 TFLOPS x 0.5 efficiency.
  EXPECT_DOUBLE_EQ(gemm_s(1e15, 989, 0.5), 1e15 / (989e12 * 0.5));
}

TEST(GemmCost, ZeroWorkTakesNoTime) { EXPECT_EQ(gemm_s(0, 989, 0.5), 0.0); }

TEST(MemoryBoundCost, IsBytesOverAchievedHbmBandwidth) {
  EXPECT_DOUBLE_EQ(memory_bound_s(4'000'000'000, 4000, 0.8), 4e9 / (4000e9 * 0.8));
}

TEST(RooflineCost, TakesTheSlowerOfComputeAndMemory) {
  const double mem = memory_bound_s(1'000'000'000, 1000, 1.0);  // 1 ms
  EXPECT_DOUBLE_EQ(roofline_s(1e9, 100, 1.0, 1'000'000'000, 1000, 1.0), mem);
  EXPECT_DOUBLE_EQ(roofline_s(1e12, 100, 1.0, 1'000'000'000, 1000, 1.0), gemm_s(1e12, 100, 1.0));
}

TEST(CpuAdamCost, IsParamsOverCoresTimesPerCoreThroughput) {
  EXPECT_DOUBLE_EQ(cpu_adam_s(1'000'000'000, 32, 1e8), 1e9 / (32 * 1e8));
}

TEST(ComputeCost, RejectsZeroAchievedRate) {
  EXPECT_THROW(gemm_s(1e9, 0, 0.5), std::invalid_argument);
  EXPECT_THROW(cpu_adam_s(10, 0, 1e8), std::invalid_argument);
}

}  // namespace
}  // namespace zsim
