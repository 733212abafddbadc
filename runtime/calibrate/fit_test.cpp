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

// calibrate's grid of single GEMMs (gpu_benches.cpp measure_gemms), timed by `truth`.
std::vector<GemmSample> grid_samples(const zsim::GemmModel& truth) {
  std::vector<GemmSample> s;
  for (std::int64_t m : {128, 512, 2048, 8192})
    for (std::int64_t n : {256, 1024, 4096, 11008})
      for (std::int64_t k : {256, 1024, 4096}) s.push_back({m, n, k, zsim::gemm_model_s(m, n, k, 1, 2, 989, truth)});
  return s;
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
  const GemmFit f = fit_gemm_model(grid_samples(truth), 2, 989, 132);
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

// Eager attention's batched calls as zrun calibrate measures them (gpu_benches.cpp measure_attention_gemms): for
// each sequence, head dim and batch of kv heads, scores (s, s, d) and the two (d, s, s) calls.
std::vector<GemmSample> attention_samples(const zsim::GemmModel& truth) {
  std::vector<GemmSample> s;
  for (std::int64_t seq : {512, 1024, 2048})
    for (std::int64_t d : {64, 128})
      for (std::int64_t b : {4, 8, 16, 32}) {
        s.push_back({seq, seq, d, zsim::gemm_model_s(seq, seq, d, b, 2, 989, truth), b, "scores"});
        s.push_back({d, seq, seq, zsim::gemm_model_s(d, seq, seq, b, 2, 989, truth), b, "probs_v"});
        s.push_back({d, seq, seq, zsim::gemm_model_s(d, seq, seq, b, 2, 989, truth), b, "dv"});
      }
  return s;
}

zsim::GemmModel h200_like() {
  zsim::GemmModel truth;
  truth.launch_us = 6;
  truth.max_efficiency = 0.85;
  truth.io_GBps = 3500;
  truth.io_overlap = 0.5;
  truth.sms = 132;
  truth.tile_m = 128;
  truth.tile_n = 256;
  truth.split_k_depth = 512;
  return truth;
}

TEST(CalibrateFit, RecoversAGemmModelFromTheGridAndAttentionsBatchedCalls) {
  const zsim::GemmModel truth = h200_like();
  std::vector<GemmSample> s = grid_samples(truth);
  for (const GemmSample& a : attention_samples(truth)) s.push_back(a);
  const GemmFit f = fit_gemm_model(s, 2, 989, 132);
  EXPECT_EQ(f.model.tile_m, 128);
  EXPECT_EQ(f.model.tile_n, 256);
  EXPECT_EQ(f.model.split_k_depth, 512);
  EXPECT_DOUBLE_EQ(f.model.io_overlap, 0.5);
  EXPECT_NEAR(f.model.launch_us, 6, 1e-6);
  EXPECT_NEAR(f.model.max_efficiency, 0.85, 1e-9);
  EXPECT_NEAR(f.model.io_GBps, 3500, 1e-3);
  EXPECT_TRUE(f.model.attention_shapes);
  EXPECT_LT(f.residual.max_abs_rel, 1e-9);
  EXPECT_EQ(f.grid.samples, 48);
  EXPECT_EQ(f.batched.samples, 72);
}

TEST(CalibrateFit, OnlyAFitThatSawAttentionsCallsIsMarkedForThemAndItPredictsEach) {
  // A model fitted on the grid alone says nothing about the attention calls (attention_shapes false: zsim keeps the
  // older pricing of the core); fitted with them, it predicts each of them.
  const zsim::GemmModel truth = h200_like();
  const std::vector<GemmSample> grid = grid_samples(truth), attention = attention_samples(truth);
  std::vector<GemmSample> both = grid;
  both.insert(both.end(), attention.begin(), attention.end());
  const GemmFit with = fit_gemm_model(both, 2, 989, 132);
  const GemmFit alone = fit_gemm_model(grid, 2, 989, 132);
  EXPECT_FALSE(alone.model.attention_shapes);
  EXPECT_EQ(alone.batched.samples, 0);
  for (const GemmSample& a : attention) {
    const double p = zsim::gemm_model_s(a.m, a.n, a.k, a.batch, 2, 989, with.model);
    EXPECT_NEAR(p, a.seconds, a.seconds * 1e-6) << a.product << " " << a.m << "x" << a.n << "x" << a.k << " x" << a.batch;
  }
}

TEST(CalibrateFit, EachFamilyOfGemmSamplesWeighsAlike) {
  // Measurements the model cannot hold exactly (the attention calls 20% slower than the truth): the fit is a
  // compromise between the families, and measuring the attention grid twice over does not move it.
  const zsim::GemmModel truth = h200_like();
  std::vector<GemmSample> s = grid_samples(truth), twice = s;
  for (GemmSample a : attention_samples(truth)) {
    a.seconds *= 1.2;
    s.push_back(a);
    twice.push_back(a);
    twice.push_back(a);
  }
  const GemmFit once = fit_gemm_model(s, 2, 989, 132), doubled = fit_gemm_model(twice, 2, 989, 132);
  EXPECT_GT(once.batched.rms_rel, 1e-3);
  EXPECT_NEAR(once.model.max_efficiency, doubled.model.max_efficiency, 1e-9);
  EXPECT_NEAR(once.model.launch_us, doubled.model.launch_us, 1e-6);
  EXPECT_NEAR(once.model.io_GBps, doubled.model.io_GBps, 1e-3);
  EXPECT_NEAR(once.batched.rms_rel, doubled.batched.rms_rel, 1e-9);
}

TEST(CalibrateFit, WeightedFitMinimisesTheWeightedRelativeError) {
  // Two inconsistent measurements of one constant: the weights decide where it lands.
  Eigen::MatrixXd X(2, 1);
  X << 1, 1;
  Eigen::VectorXd y(2), w(2);
  y << 1, 2;
  w << 1, 1;
  const double even = fit_relative_nonnegative(X, y, w).coef[0];
  w << 1, 10;
  const double toward_second = fit_relative_nonnegative(X, y, w).coef[0];
  EXPECT_NEAR(even, fit_relative_nonnegative(X, y).coef[0], 1e-12);
  EXPECT_GT(toward_second, even);
  EXPECT_LT(toward_second, 2.0);
  EXPECT_THROW(fit_relative_nonnegative(X, y, Eigen::VectorXd::Zero(2)), std::invalid_argument);
}

}  // namespace
}  // namespace zrun::calibrate
