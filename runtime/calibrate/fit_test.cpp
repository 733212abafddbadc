// zrun calibrate's fits on synthetic measurements: known lines and models are recovered.
#include "runtime/calibrate/fit.hpp"

#include <gtest/gtest.h>

#include "cost_models/collective_cost.hpp"

namespace zrun::calibrate {
namespace {

TEST(CalibrateFit, RecoversAKnownLatencyBandwidthLine) {
  std::vector<SizeSample> s;
  for (double b = 1024; b <= (1 << 30); b *= 4) s.push_back({b, 5e-6 + b / 20e9});
  const LatencyBandwidthFit f = fit_latency_bandwidth(s);
  EXPECT_NEAR(f.latency_s, 5e-6, 1e-12);
  EXPECT_NEAR(f.GBps, 20, 1e-6);
  EXPECT_LT(f.residual.max_abs_rel, 1e-9);
  EXPECT_EQ(f.residual.samples, static_cast<int>(s.size()));
}

TEST(CalibrateFit, ReportsTheResidualOfNoisyMeasurements) {
  std::vector<SizeSample> s;
  int i = 0;
  for (double b = 1024; b <= (1 << 30); b *= 4, ++i) s.push_back({b, (5e-6 + b / 20e9) * (i % 2 ? 1.02 : 0.98)});
  const LatencyBandwidthFit f = fit_latency_bandwidth(s);
  EXPECT_NEAR(f.GBps, 20, 0.5);
  EXPECT_NEAR(f.latency_s, 5e-6, 0.3e-6);
  EXPECT_GT(f.residual.rms_rel, 0.01);
  EXPECT_LT(f.residual.max_abs_rel, 0.03);
}

TEST(CalibrateFit, DropsATermThatWouldComeOutNegative) {
  // Pure bandwidth, slightly super-linear at small sizes: an unconstrained fit gives a negative latency.
  std::vector<SizeSample> s = {{1e6, 0.9e-4}, {1e7, 1e-3}, {1e8, 1e-2}, {1e9, 1e-1}};
  const LatencyBandwidthFit f = fit_latency_bandwidth(s);
  EXPECT_EQ(f.latency_s, 0.0);
  EXPECT_GT(f.GBps, 9);
  EXPECT_LT(f.GBps, 11);
}

TEST(CalibrateFit, RejectsANonPositiveMeasurement) {
  EXPECT_THROW(fit_latency_bandwidth({{1024, 1e-6}, {2048, 0}}), std::invalid_argument);
  EXPECT_THROW(fit_latency_bandwidth({}), std::invalid_argument);
}

TEST(CalibrateFit, RecoversALinkFromCollectivesOfEveryKind) {
  // Measurements made by zsim's own ring model with 3 us per step and 300 GB/s: the fit gives them back.
  const zsim::CollectiveLink link{3e-6, 3e-6, 300e9};
  std::vector<CollectiveSample> s;
  for (auto kind : {zsim::CollectiveKind::all_reduce, zsim::CollectiveKind::all_gather,
                    zsim::CollectiveKind::reduce_scatter, zsim::CollectiveKind::broadcast,
                    zsim::CollectiveKind::all_to_all})
    for (int n : {2, 4, 8})
      for (double b = 1024; b <= (1 << 30); b *= 16)
        s.push_back({kind, n, 1, b, zsim::collective_s(kind, zsim::CollectiveAlgorithm::ring, b, n, 1, link)});
  const LinkFit f = fit_link(s);
  EXPECT_NEAR(f.latency_per_step_s, 3e-6, 1e-12);
  EXPECT_NEAR(f.GBps, 300, 1e-6);
  EXPECT_LT(f.residual.max_abs_rel, 1e-9);
}

TEST(CalibrateFit, RecoversAKnownGemmModel) {
  zsim::GemmModel truth;
  truth.launch_us = 4;
  truth.max_efficiency = 0.72;
  truth.io_GBps = 2500;
  truth.sms = 132;
  truth.tile_m = 128;
  truth.tile_n = 256;
  truth.split_k_depth = 512;
  std::vector<GemmSample> s;
  for (std::int64_t m : {128, 512, 2048, 8192})
    for (std::int64_t n : {256, 1024, 4096, 11008})
      for (std::int64_t k : {256, 1024, 4096}) s.push_back({m, n, k, zsim::gemm_model_s(m, n, k, 1, 2, 989, truth)});
  const GemmFit f = fit_gemm_model(s, 2, 989, 132);
  EXPECT_EQ(f.model.tile_m, 128);
  EXPECT_EQ(f.model.tile_n, 256);
  EXPECT_EQ(f.model.split_k_depth, 512);
  EXPECT_NEAR(f.model.launch_us, 4, 1e-6);
  EXPECT_NEAR(f.model.max_efficiency, 0.72, 1e-9);
  EXPECT_NEAR(f.model.io_GBps, 2500, 1e-3);
  EXPECT_LT(f.residual.max_abs_rel, 1e-9);
}

TEST(CalibrateFit, AGemmModelWithoutATrafficTermLeavesItAtZero) {
  zsim::GemmModel truth;
  truth.launch_us = 6;
  truth.max_efficiency = 0.6;
  std::vector<GemmSample> s;
  for (std::int64_t m : {256, 2048, 8192})
    for (std::int64_t n : {512, 4096})
      for (std::int64_t k : {512, 4096}) s.push_back({m, n, k, zsim::gemm_model_s(m, n, k, 1, 2, 989, truth)});
  const GemmFit f = fit_gemm_model(s, 2, 989, 132);
  EXPECT_NEAR(f.model.max_efficiency, 0.6, 1e-6);
  EXPECT_NEAR(f.model.io_GBps, 0, 1e-9);
}

}  // namespace
}  // namespace zrun::calibrate
