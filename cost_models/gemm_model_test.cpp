// The measured GEMM model: wave quantization, the fixed and traffic terms, the efficiency of a set of GEMMs.
#include "cost_models/gemm_model.hpp"

#include <gtest/gtest.h>

namespace zsim {
namespace {

GemmModel h100_like() {
  GemmModel g;
  g.launch_us = 5;
  g.max_efficiency = 0.7;
  g.io_GBps = 2000;
  g.tile_m = 128;
  g.tile_n = 128;
  g.sms = 132;
  return g;
}

TEST(GemmModel, FullWavesHaveWaveEfficiencyOne) {
  // 132 tiles of 128 x 128 fill one wave exactly.
  EXPECT_DOUBLE_EQ(wave_efficiency(128 * 12, 128 * 11, 4096, h100_like()), 1.0);
}

TEST(GemmModel, OneTileMoreThanAWaveHalvesTheWaveEfficiency) {
  // 133 tiles run in two waves of 132 slots: 133 / 264.
  EXPECT_DOUBLE_EQ(wave_efficiency(128 * 133, 128, 4096, h100_like()), 133.0 / 264.0);
}

TEST(GemmModel, SplitKFillsIdleSmsWhenKIsLong) {
  GemmModel g = h100_like();
  // 32 tiles: 4 slices of k fill 128 of 132 SMs when k allows 4 slices of >= 512.
  g.split_k_depth = 512;
  EXPECT_DOUBLE_EQ(wave_efficiency(128, 128 * 32, 4096, g), 128.0 / 132.0);
  // k = 1024 allows only 2 slices.
  EXPECT_DOUBLE_EQ(wave_efficiency(128, 128 * 32, 1024, g), 64.0 / 132.0);
  // Without split-K the 32 tiles are one partial wave.
  EXPECT_DOUBLE_EQ(wave_efficiency(128, 128 * 32, 4096, h100_like()), 32.0 / 132.0);
}

TEST(GemmModel, TimeIsLaunchPlusFlopsAtWavedPeakPlusTraffic) {
  const GemmModel g = h100_like();
  const std::int64_t m = 128 * 12, n = 128 * 11, k = 4096;
  const double want = 5e-6 + 2.0 * m * n * k / (989e12 * 0.7) + 2.0 * (double(m) * k + double(k) * n + double(m) * n) / 2000e9;
  EXPECT_NEAR(gemm_model_s(m, n, k, 1, 2, 989, g), want, want * 1e-12);
}

TEST(GemmModel, LargeGemmsApproachTheMaximumEfficiency) {
  const GemmModel g = h100_like();
  const double e = gemm_model_efficiency({{128 * 12 * 8, 128 * 11 * 8, 16384, 1}}, 2, 989, g);
  EXPECT_GT(e, 0.9 * g.max_efficiency);
  EXPECT_LE(e, g.max_efficiency);
}

TEST(GemmModel, SmallGemmsAreFarBelowTheMaximumEfficiency) {
  const double e = gemm_model_efficiency({{256, 256, 256, 1}}, 2, 989, h100_like());
  EXPECT_LT(e, 0.05);
}

TEST(GemmModel, BatchFillsWavesLikeMoreTiles) {
  const GemmModel g = h100_like();
  // 12 heads of a 128 x 128 output: 12 tiles in one call, not 12 separate one-tile waves.
  EXPECT_LT(gemm_model_s(128, 128, 64, 12, 2, 989, g), 12 * gemm_model_s(128, 128, 64, 1, 2, 989, g));
}

TEST(GemmModel, IoOverlapHidesThatShareOfTheSmallerOfFlopAndTrafficTime) {
  GemmModel g = h100_like();
  // Attention's scores call: s x s output of k = 64, 12 heads: traffic-bound.
  const std::int64_t s = 1024, d = 64, b = 12;
  const double flop = 2.0 * s * s * d * b / (989e12 * 0.7 * wave_efficiency(s, s, d, g, b));
  const double io = 2.0 * b * (double(s) * d + double(d) * s + double(s) * s) / 2000e9;
  ASSERT_LT(flop, io);
  EXPECT_NEAR(gemm_model_s(s, s, d, b, 2, 989, g), 5e-6 + flop + io, 1e-15);  // 0: they add
  g.io_overlap = 1;
  EXPECT_NEAR(gemm_model_s(s, s, d, b, 2, 989, g), 5e-6 + io, 1e-15);  // 1: the roofline
  g.io_overlap = 0.5;
  EXPECT_NEAR(gemm_model_s(s, s, d, b, 2, 989, g), 5e-6 + io + 0.5 * flop, 1e-15);
}

TEST(GemmModel, CallsOfOneShapeCountEach) {
  const GemmModel g = h100_like();
  const double one = gemm_model_s(64, 1024, 1024, 12, 2, 989, g);
  const double flops = 2.0 * 64 * 1024 * 1024 * 12;
  // Four calls of the batch: four times the FLOPs in four times the time, the efficiency of one call.
  EXPECT_NEAR(gemm_model_efficiency({{64, 1024, 1024, 12, 4}}, 2, 989, g), flops / (989e12 * one), 1e-12);
  EXPECT_NEAR(gemm_model_efficiency({{64, 1024, 1024, 12, 4}, {2048, 512, 512, 1, 1}}, 2, 989, g),
              (4 * flops + 2.0 * 2048 * 512 * 512) /
                  (989e12 * (4 * one + gemm_model_s(2048, 512, 512, 1, 2, 989, g))),
              1e-12);
}

TEST(GemmModel, EfficiencyOfAnEmptySetIsZero) { EXPECT_EQ(gemm_model_efficiency({}, 2, 989, h100_like()), 0.0); }

TEST(GemmModel, RefusesAModelWithoutEfficiency) {
  EXPECT_THROW(gemm_model_s(128, 128, 128, 1, 2, 989, GemmModel{}), std::invalid_argument);
}

}  // namespace
}  // namespace zsim

namespace zsim {
namespace {

TEST(GemmAlignment, EveryDimensionAMultipleOfSixteenBytesIsAligned) {
  EXPECT_TRUE(gemm_aligned({4096, 50304, 768}, 2));
  EXPECT_TRUE(gemm_aligned({4096, 50300, 768}, 4));  // fp32: 4 elements
}

TEST(GemmAlignment, AnyDimensionOffTheBoundaryIsMisaligned) {
  EXPECT_FALSE(gemm_aligned({4096, 50257, 768}, 2));  // GPT-2's head, forward
  EXPECT_FALSE(gemm_aligned({4096, 768, 50257}, 2));  // its input gradient
  EXPECT_FALSE(gemm_aligned({50257, 768, 4096}, 2));  // its weight gradient
  EXPECT_FALSE(gemm_aligned({4096, 50300, 768}, 2));  // a multiple of 4 is not of 8 at 16-bit
}

TEST(GemmAlignment, ABytesPerElementThatDoesNotDivideSixteenIsRejected) {
  EXPECT_THROW(gemm_aligned({8, 8, 8}, 3), std::invalid_argument);
}

}  // namespace
}  // namespace zsim
