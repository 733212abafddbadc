// zrun calibrate's fits on synthetic measurements: known lines and models are recovered.
#include "runtime/calibrate/fit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "cost_models/collective_cost.hpp"
#include "sim/plan/attention_flops.hpp"
#include "sim/plan/kernel_launches.hpp"

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

// Three kernels of their own rates, each at three sizes, all paying the same 3 us: one latency and a rate each.
// CPU Adam at t threads: min(t x per core, node ceiling). The H200 machine's figures: 2.30e8 per core, 4.74e9 node.
std::vector<CpuAdamSample> cpu_adam_samples(double per_core, double node, const std::vector<int>& threads,
                                            double params = 134217728) {
  std::vector<CpuAdamSample> s;
  for (int t : threads) s.push_back({t, params, params / std::min(t * per_core, node)});
  return s;
}

TEST(CalibrateFit, RecoversCpuAdamsPerCoreSlopeAndNodeCeiling) {
  const CpuAdamFit f = fit_cpu_adam(cpu_adam_samples(2.3e8, 4.74e9, {1, 2, 4, 8, 16, 32}));
  EXPECT_NEAR(f.per_core, 2.3e8, 1);
  EXPECT_NEAR(f.node_params_per_s, 4.74e9, 10);
  EXPECT_EQ(f.slope_up_to, 16);
  EXPECT_LT(f.residual.max_abs_rel, 1e-12);
  EXPECT_EQ(f.residual.samples, 6);
  // A knee lower down (1.5e8 per thread up to 4e8, between 2 and 4 threads): the slope from 1 and 2 threads, the
  // rest on the ceiling.
  const CpuAdamFit low = fit_cpu_adam(cpu_adam_samples(1.5e8, 4e8, {1, 2, 4, 8, 16, 24}));
  EXPECT_NEAR(low.per_core, 1.5e8, 1);
  EXPECT_NEAR(low.node_params_per_s, 4e8, 1);
  EXPECT_EQ(low.slope_up_to, 2);
  // The samples' order does not matter.
  const CpuAdamFit shuffled = fit_cpu_adam(cpu_adam_samples(2.3e8, 4.74e9, {32, 4, 1, 16, 2, 8}));
  EXPECT_NEAR(shuffled.per_core, 2.3e8, 1);
  EXPECT_NEAR(shuffled.node_params_per_s, 4.74e9, 10);
}

TEST(CalibrateFit, ACpuAdamFitOfNoisyMeasurementsStaysCloseAndSaysHowClose) {
  std::vector<CpuAdamSample> s = cpu_adam_samples(2.3e8, 4.74e9, {1, 2, 4, 8, 16, 32});
  for (std::size_t i = 0; i < s.size(); ++i) s[i].seconds *= i % 2 ? 1.03 : 0.97;
  const CpuAdamFit f = fit_cpu_adam(s);
  EXPECT_NEAR(f.per_core, 2.3e8, 0.05 * 2.3e8);
  EXPECT_NEAR(f.node_params_per_s, 4.74e9, 0.05 * 4.74e9);
  EXPECT_GT(f.residual.rms_rel, 0.01);
  EXPECT_LT(f.residual.max_abs_rel, 0.05);
}

TEST(CalibrateFit, ASampleSlowerThanOneAtFewerThreadsIsFittedAtTheirRateAndShowsInTheResidual) {
  // zrun calibrate --quick on the 32-thread H200 host (4M parameters): 32 threads ran 10x slower than 16 (a thread of
  // the team descheduled), which is no memory-bandwidth limit: the fit takes 16 threads' rate there.
  const double n = 4194304;
  const std::vector<CpuAdamSample> s = {{1, n, 7.58e-3}, {2, n, 3.43e-3}, {4, n, 1.56e-3},
                                        {8, n, 0.83e-3}, {16, n, 0.63e-3}, {32, n, 6.01e-3}};
  const CpuAdamFit f = fit_cpu_adam(s);
  EXPECT_EQ(f.raised, std::vector<int>{32});
  EXPECT_NEAR(f.node_params_per_s, n / 0.63e-3, 0.02 * n / 0.63e-3);
  EXPECT_GT(f.per_core, 5e8);
  EXPECT_LT(f.per_core, 7e8);
  EXPECT_EQ(f.slope_up_to, 8);
  EXPECT_GT(f.residual.max_abs_rel, 5);  // 32 threads' measurement, 10x below the fit
  // Without that sample the fit is close everywhere.
  const CpuAdamFit clean = fit_cpu_adam({s.begin(), s.end() - 1});
  EXPECT_TRUE(clean.raised.empty());
  EXPECT_LT(clean.residual.max_abs_rel, 0.15);
}

TEST(CalibrateFit, ScalingToTheLastThreadCountPutsTheCeilingAtItsRate) {
  // No knee in the measured range: the ceiling is the most threads' rate (the node's bandwidth is at least that), so
  // min(t x per core, ceiling) is the line itself up to every measured thread count.
  const CpuAdamFit f = fit_cpu_adam(cpu_adam_samples(2e8, 1e12, {1, 2, 4, 8}));
  EXPECT_NEAR(f.per_core, 2e8, 1e-3);
  EXPECT_NEAR(f.node_params_per_s, 8 * 2e8, 1e-2);
  EXPECT_LT(f.residual.max_abs_rel, 1e-12);
}

TEST(CalibrateFit, OneThreadCountGivesThePerCoreFigureAndNoCeiling) {
  // A record before calibrate measured several thread counts: 4.742e9 params/s on 32 threads.
  const CpuAdamFit f = fit_cpu_adam({{32, 134217728, 134217728 / 4.742e9}});
  EXPECT_NEAR(f.per_core, 4.742e9 / 32, 1e-3);
  EXPECT_EQ(f.node_params_per_s, 0.0);
  EXPECT_EQ(f.slope_up_to, 32);
  EXPECT_LT(f.residual.max_abs_rel, 1e-12);
}

// Two ranks at once, each on t threads, all together at most `node` (a data-parallel step's optimizer); seconds the
// slowest rank's.
std::vector<CpuAdamSample> together_samples(double per_core, double node, const std::vector<int>& threads,
                                            double params = 134217728) {
  std::vector<CpuAdamSample> s;
  for (int t : threads) s.push_back({t, params, 2 * params / std::min(2 * t * per_core, node), 2});
  return s;
}

TEST(CalibrateFit, RanksAtOnceGiveTheCeilingAndOneRankTheSlope) {
  // Alone, the node reaches 5e9; two ranks at once get 4e9 between them (the step waits for the slower one).
  std::vector<CpuAdamSample> s = cpu_adam_samples(2.3e8, 5e9, {1, 2, 4, 8, 16, 32});
  const std::vector<CpuAdamSample> two = together_samples(2.3e8, 4e9, {1, 2, 4, 8, 16});
  s.insert(s.end(), two.begin(), two.end());
  const CpuAdamFit f = fit_cpu_adam(s);
  EXPECT_NEAR(f.per_core, 2.3e8, 1);
  EXPECT_EQ(f.slope_up_to, 16);
  EXPECT_NEAR(f.node_params_per_s, 4e9, 10);  // from 2 x 16 threads (beyond 16), not alone's 5e9
  EXPECT_EQ(f.ceiling_ranks, 2);
  EXPECT_EQ(f.ceiling_threads, std::vector<int>{16});
  EXPECT_EQ(f.residual.samples, 11);
  // Alone's 32 threads (5e9 measured, 4e9 fitted) are the residual's worst.
  EXPECT_NEAR(f.residual.max_abs_rel, 0.2, 1e-9);
}

TEST(CalibrateFit, RanksAtOnceOnTheSlopeGiveTheCeilingOnlyWhereNoneIsBeyondIt) {
  // Together samples of 2 x 1 and 2 x 2 threads only (within the slope's 16): they are the ceiling's, as measured.
  std::vector<CpuAdamSample> s = cpu_adam_samples(2.3e8, 5e9, {1, 2, 4, 8, 16, 32});
  const std::vector<CpuAdamSample> two = together_samples(2.3e8, 4e9, {1, 2});
  s.insert(s.end(), two.begin(), two.end());
  const CpuAdamFit f = fit_cpu_adam(s);
  // 2 x 2.3e8 and 4 x 2.3e8: the constant of least relative error between them.
  const double a = 4.6e8, b = 9.2e8;
  EXPECT_NEAR(f.node_params_per_s, (1 / a + 1 / b) / (1 / (a * a) + 1 / (b * b)), 1);
  EXPECT_EQ(f.ceiling_threads, (std::vector<int>{1, 2}));
}

TEST(CalibrateFit, ACpuAdamFitNeedsASampleOfOneRank) {
  EXPECT_THROW(fit_cpu_adam(together_samples(2.3e8, 4e9, {1, 2, 4})), std::invalid_argument);
  EXPECT_THROW(fit_cpu_adam({{4, 1e6, 1e-3, 0}}), std::invalid_argument);
}

TEST(CalibrateFit, ACpuAdamFitRejectsBadSamples) {
  EXPECT_THROW(fit_cpu_adam({}), std::invalid_argument);
  EXPECT_THROW(fit_cpu_adam({{0, 1e6, 1e-3}}), std::invalid_argument);
  EXPECT_THROW(fit_cpu_adam({{4, 1e6, 0}}), std::invalid_argument);
}

TEST(CalibrateFit, CpuAdamIsTimedAtPowersOfTwoThreadsAndEveryHardwareThread) {
  EXPECT_EQ(cpu_adam_thread_counts(32), (std::vector<int>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(cpu_adam_thread_counts(24), (std::vector<int>{1, 2, 4, 8, 16, 24}));
  EXPECT_EQ(cpu_adam_thread_counts(1), (std::vector<int>{1}));
  EXPECT_EQ(cpu_adam_thread_counts(3), (std::vector<int>{1, 2, 3}));
}

TEST(CalibrateFit, RecoversTheKernelsSharedFixedCostAndEachKernelsRate) {
  std::vector<KernelSample> s;
  for (double b = 1e6; b <= 1e9; b *= 30) {
    s.push_back({"rmsnorm.fwd", "norm", b, 3e-6 + b / 1.5e12});
    s.push_back({"swiglu.fwd", "activation", 1.5 * b, 3e-6 + 1.5 * b / 2.0e12});
    s.push_back({"fused_adam", "adam", 2 * b, 3e-6 + 2 * b / 4.0e12});
  }
  const KernelLatencyFit f = fit_kernel_latency(s);
  EXPECT_NEAR(f.latency_s, 3e-6, 1e-12);
  EXPECT_NEAR(f.GBps.at("rmsnorm.fwd"), 1500, 1e-6);
  EXPECT_NEAR(f.GBps.at("swiglu.fwd"), 2000, 1e-6);
  EXPECT_NEAR(f.GBps.at("fused_adam"), 4000, 1e-6);
  EXPECT_LT(f.residual.max_abs_rel, 1e-9);
  EXPECT_EQ(f.residual.samples, 9);
}

TEST(CalibrateFit, ACallOfSeveralKernelsPaysTheFixedCostPerKernel) {
  // A norm's backward runs three kernels a call: its samples pay 3 x the shared fixed cost, the rest its bytes.
  std::vector<KernelSample> s;
  for (double b = 1e6; b <= 1e9; b *= 30) {
    s.push_back({"rmsnorm.fwd", "norm", b, 3e-6 + b / 1.5e12});
    s.push_back({"rmsnorm.bwd", "norm_backward", 2.5 * b, 3 * 3e-6 + 2.5 * b / 1.0e12, 0, 3});
  }
  const KernelLatencyFit f = fit_kernel_latency(s);
  EXPECT_NEAR(f.latency_s, 3e-6, 1e-12);
  EXPECT_NEAR(f.GBps.at("rmsnorm.bwd"), 1000, 1e-6);
  EXPECT_LT(f.residual.max_abs_rel, 1e-9);
}

TEST(CalibrateFit, AKernelLatencyFitNeedsAKernelAtTwoSizes) {
  EXPECT_THROW(fit_kernel_latency({{"rmsnorm.fwd", "norm", 1e9, 1e-3}, {"swiglu.fwd", "activation", 1e9, 1e-3}}),
               std::invalid_argument);
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

// calibrate's flash attention grid (gpu_benches.cpp measure_flash_attention) in one direction, timed by a kernel of
// efficiency `e` behind launches of `launch_s` each: 2 dtypes x 2 head dims x 3 sequences x 4 head shapes.
std::vector<FlashSample> flash_samples(const char* direction, double e, double launch_s, double peak = 989) {
  const std::array<std::int64_t, 3> heads[] = {{1, 16, 16}, {4, 12, 12}, {2, 32, 8}, {4, 32, 32}};  // b, heads, kv
  std::vector<FlashSample> v;
  for (const char* dt : {"bf16", "fp16"})
    for (std::int64_t d : {64, 128})
      for (std::int64_t seq : {512, 1024, 2048})
        for (const auto& [b, h, kv] : heads) {
          FlashSample f{dt, direction, b, h, kv, seq, d, 0};
          f.seconds = flash_launches(f) * launch_s + flash_flops(f) / (peak * 1e12 * e);
          v.push_back(f);
        }
  return v;
}

TEST(CalibrateFit, FlashFlopsAndLaunchesAreTheOnesZsimChargesTheCore) {
  // The schedule's attn.o core (sim/plan/attention_flops.hpp, kernel_launches.hpp) for the same shape: b 2, s 1024,
  // 32 heads of 128 (8 kv heads).
  zsim::ModelSpec m;
  m.hidden = 32 * 128, m.heads = 32, m.kv_heads = 8;
  m.attention = zsim::Attention::flash;
  zsim::TrainingSpec t;
  t.micro_batch = 2, t.seq_len = 1024;
  const FlashSample fwd{"bf16", "forward", 2, 32, 8, 1024, 128, 1e-3}, bwd{"bf16", "backward", 2, 32, 8, 1024, 128, 1e-3};
  EXPECT_DOUBLE_EQ(flash_flops(fwd), zsim::attention_core_flops(m, t).forward);
  EXPECT_DOUBLE_EQ(flash_flops(bwd), zsim::attention_core_flops(m, t).backward);
  const auto o = zsim::unit_kernel_launches(zsim::ModelUnitKind::attn_o, m, t);
  const auto linear = zsim::unit_kernel_launches(zsim::ModelUnitKind::attn_q, m, t);
  EXPECT_EQ(flash_launches(fwd), o.forward - linear.forward);
  EXPECT_EQ(flash_launches(bwd), o.backward - linear.backward);
  EXPECT_EQ(flash_launches(bwd), 4);  // flash_attention.cu: dq accumulator memset, delta, the kernel, dq conversion
}

TEST(CalibrateFit, RecoversAKnownFlashEfficiencyBehindTheLaunches) {
  for (auto [direction, e] : {std::pair{"forward", 0.31}, std::pair{"backward", 0.22}}) {
    const FlashFit f = fit_flash_efficiency(flash_samples(direction, e, 3.3e-6), 989, 3.3e-6);
    EXPECT_NEAR(f.efficiency, e, 1e-9) << direction;
    EXPECT_LT(f.residual.max_abs_rel, 1e-9);
    EXPECT_EQ(f.residual.samples, 48);
    EXPECT_EQ(f.launch_bound, 0);
    ASSERT_EQ(f.by_head_dim.size(), 2u);
    EXPECT_EQ(f.by_head_dim.at(64).samples, 24);
    EXPECT_EQ(f.by_dtype.at("fp16").samples, 24);
  }
  // Fitted without the launches (launch_s 0), the same measurements give a lower efficiency: the launches' time is
  // charged to the FLOPs.
  EXPECT_LT(fit_flash_efficiency(flash_samples("backward", 0.22, 3.3e-6), 989, 0).efficiency, 0.22 - 1e-4);
}

TEST(CalibrateFit, AFlashEfficiencyThatDiffersByHeadDimShowsInTheResidualPerHeadDim) {
  // Head dim 64 at 0.2, 128 at 0.4: one efficiency between them, each head dim's residual large (the main session
  // judges from such a record whether the key needs a head-dim axis).
  std::vector<FlashSample> v;
  for (const FlashSample& f : flash_samples("forward", 0.2, 3e-6))
    if (f.head_dim == 64) v.push_back(f);
  for (const FlashSample& f : flash_samples("forward", 0.4, 3e-6))
    if (f.head_dim == 128) v.push_back(f);
  const FlashFit f = fit_flash_efficiency(v, 989, 3e-6);
  EXPECT_GT(f.efficiency, 0.2);
  EXPECT_LT(f.efficiency, 0.4);
  EXPECT_GT(f.by_head_dim.at(64).rms_rel, 0.1);
  EXPECT_GT(f.by_head_dim.at(128).rms_rel, 0.1);
  EXPECT_NEAR(f.by_dtype.at("bf16").rms_rel, f.by_dtype.at("fp16").rms_rel, 1e-12);  // the dtypes alike
}

TEST(CalibrateFit, AFlashSampleNoLongerThanItsLaunchesIsLeftOutOfTheFit) {
  std::vector<FlashSample> v = flash_samples("backward", 0.25, 3e-6);
  FlashSample tiny{"bf16", "backward", 1, 1, 1, 64, 64, 10e-6};  // under 4 launches of 3 us
  v.push_back(tiny);
  const FlashFit f = fit_flash_efficiency(v, 989, 3e-6);
  EXPECT_NEAR(f.efficiency, 0.25, 1e-9);
  EXPECT_EQ(f.launch_bound, 1);
  EXPECT_EQ(f.residual.samples, 49);
  EXPECT_THROW(fit_flash_efficiency({tiny}, 989, 3e-6), std::invalid_argument);
}

TEST(CalibrateFit, AFlashFitTakesOneDirection) {
  std::vector<FlashSample> v = flash_samples("forward", 0.3, 3e-6);
  v.push_back(flash_samples("backward", 0.3, 3e-6).front());
  EXPECT_THROW(fit_flash_efficiency(v, 989, 3e-6), std::invalid_argument);
  EXPECT_THROW(fit_flash_efficiency({}, 989, 3e-6), std::invalid_argument);
}

}  // namespace
}  // namespace zrun::calibrate
