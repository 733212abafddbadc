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

TEST(GemmModel, EfficiencyOfAnEmptySetIsZero) { EXPECT_EQ(gemm_model_efficiency({}, 2, 989, h100_like()), 0.0); }

TEST(GemmModel, RefusesAModelWithoutEfficiency) {
  EXPECT_THROW(gemm_model_s(128, 128, 128, 1, 2, 989, GemmModel{}), std::invalid_argument);
}

}  // namespace
}  // namespace zsim
