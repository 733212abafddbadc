// Compute cost models against FLOPs / (peak x efficiency) and bytes / (bandwidth x efficiency).
#include "cost_models/compute_cost.hpp"

#include <cmath>

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

// The H200 machine's measurements (2 x H200, 32 cores): 2.30e8 params/s per core, 4.74e9 for the node.
TEST(CpuAdamCost, WithoutACeilingEveryCoreAddsItsRate) {
  EXPECT_DOUBLE_EQ(cpu_adam_params_per_s(16, 2.3e8), 16 * 2.3e8);
  EXPECT_DOUBLE_EQ(cpu_adam_params_per_s(16, 2.3e8, 0, 2), 16 * 2.3e8);  // 0: no ceiling, however many ranks
  EXPECT_DOUBLE_EQ(cpu_adam_s(1'000'000'000, 32, 1e8, 0, 8), cpu_adam_s(1'000'000'000, 32, 1e8));
}

TEST(CpuAdamCost, TheNodesCeilingCapsARanksCores) {
  // One rank on 32 cores: 7.36e9 from its cores, capped at the node's 4.74e9.
  EXPECT_DOUBLE_EQ(cpu_adam_params_per_s(32, 2.3e8, 4.74e9, 1), 4.74e9);
  // One rank on 8 cores stays below the ceiling: the cores' rate.
  EXPECT_DOUBLE_EQ(cpu_adam_params_per_s(8, 2.3e8, 4.74e9, 1), 8 * 2.3e8);
  EXPECT_DOUBLE_EQ(cpu_adam_s(117'000'000, 32, 2.3e8, 4.74e9, 1), 117e6 / 4.74e9);
}

TEST(CpuAdamCost, TheNodesRanksShareItsCeiling) {
  // Two ranks of 16 cores each: 3.68e9 from the cores, 2.37e9 each of the node's 4.74e9.
  EXPECT_DOUBLE_EQ(cpu_adam_params_per_s(16, 2.3e8, 4.74e9, 2), 4.74e9 / 2);
  EXPECT_DOUBLE_EQ(cpu_adam_s(117'000'000, 16, 2.3e8, 4.74e9, 2), 117e6 / 2.37e9);
  // Eight ranks of 4 cores: 0.92e9 from the cores against 0.5925e9 each of the ceiling.
  EXPECT_DOUBLE_EQ(cpu_adam_params_per_s(4, 2.3e8, 4.74e9, 8), 4.74e9 / 8);
  // Eight ranks of 2 cores: below their share, the cores' rate.
  EXPECT_DOUBLE_EQ(cpu_adam_params_per_s(2, 2.3e8, 4.74e9, 8), 2 * 2.3e8);
}

TEST(CpuAdamCost, RejectsABadCeilingOrRankCount) {
  EXPECT_THROW(cpu_adam_params_per_s(16, 2.3e8, -1, 2), std::invalid_argument);
  EXPECT_THROW(cpu_adam_params_per_s(16, 2.3e8, 4.74e9, 0), std::invalid_argument);
  EXPECT_EQ(cpu_adam_s(0, 16, 2.3e8, 4.74e9, 2), 0.0);
}

// Measured rates (record AC's host, one rank alone): 5.43e8 / 1.02e9 / 1.88e9 / 2.86e9 / 3.92e9 / 4.53e9 params/s on
// 1 / 2 / 4 / 8 / 16 / 32 threads.
const std::vector<std::pair<double, double>> kAlone{{1, 5.43e8}, {2, 1.02e9}, {4, 1.88e9},
                                                    {8, 2.86e9}, {16, 3.92e9}, {32, 4.53e9}};

TEST(CpuAdamMeasured, IsTheMeasuredRateAtAMeasuredThreadCount) {
  EXPECT_NEAR(cpu_adam_measured_params_per_s(kAlone, 16), 3.92e9, 1.0);
  EXPECT_NEAR(cpu_adam_measured_params_per_s(kAlone, 1), 5.43e8, 1.0);
}

TEST(CpuAdamMeasured, IsLinearInLogThreadsAndLogRateBetweenTwoCounts) {
  // 12 cores: log2(12/8) = 0.585 of the way from 8 to 16 threads, in log rate.
  const double t = std::log(12.0 / 8) / std::log(2.0);
  EXPECT_NEAR(cpu_adam_measured_params_per_s(kAlone, 12), std::exp(std::log(2.86e9) + t * std::log(3.92e9 / 2.86e9)),
              1e-3);
}

TEST(CpuAdamMeasured, KeepsTheMostThreadsRateBeyondThemAndScalesTheFewestsBelowThem) {
  EXPECT_NEAR(cpu_adam_measured_params_per_s(kAlone, 64), 4.53e9, 1.0);
  EXPECT_NEAR(cpu_adam_measured_params_per_s(kAlone, 0.5), 5.43e8 / 2, 1.0);
}

TEST(CpuAdamMeasured, RejectsNoRatesARateThatIsNotPositiveAndNoCores) {
  EXPECT_THROW(cpu_adam_measured_params_per_s({}, 8), std::invalid_argument);
  EXPECT_THROW(cpu_adam_measured_params_per_s({{8, 0}}, 8), std::invalid_argument);
  EXPECT_THROW(cpu_adam_measured_params_per_s(kAlone, 0), std::invalid_argument);
}

TEST(ComputeCost, RejectsZeroAchievedRate) {
  EXPECT_THROW(gemm_s(1e9, 0, 0.5), std::invalid_argument);
  EXPECT_THROW(cpu_adam_s(10, 0, 1e8), std::invalid_argument);
}

}  // namespace
}  // namespace zsim
