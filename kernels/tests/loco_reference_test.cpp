// The LoCo error-feedback rule itself (double-precision reference): over 100 steps the accumulated
// error of the quantized sum is several times smaller with feedback than without.
#include <gtest/gtest.h>
#include <cmath>
#include <cstdio>
#include <random>
#include "kernels/tests/reference.hpp"

namespace zk {
namespace {

double accumulated_error(bool feedback, int steps, int64_t n, int64_t block, double beta) {
  std::mt19937_64 rng(2024);  // the same gradient stream for both runs
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> err(n, 0.0), sum_q(n, 0.0), sum_g(n, 0.0);
  for (int t = 0; t < steps; ++t) {
    std::vector<double> g(n);
    for (auto& x : g) x = d(rng);
    const auto q = ref::loco_quant_dequant(g, err, block, beta, /*reset=*/t == 0, feedback);
    for (int64_t i = 0; i < n; ++i) { sum_q[i] += q[i]; sum_g[i] += g[i]; }
  }
  double e2 = 0.0;
  for (int64_t i = 0; i < n; ++i) e2 += (sum_q[i] - sum_g[i]) * (sum_q[i] - sum_g[i]);
  return std::sqrt(e2 / n);
}

TEST(LocoReference, FeedbackShrinksAccumulatedErrorOfHundredSteps) {
  const double without = accumulated_error(false, 100, 1 << 14, 256, 0.8);
  const double with = accumulated_error(true, 100, 1 << 14, 256, 0.8);
  std::printf("LoCo reference: rms accumulated error without feedback %.4f, with %.4f, factor %.2f\n", without, with,
              without / with);
  EXPECT_GT(without / with, 3.0);
}

}  // namespace
}  // namespace zk
