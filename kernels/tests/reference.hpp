// Double-precision CPU references for the kernels' tests: block absmax steps, Adam, and a reference
// LoCo-compensated int4 quantizer, plus random-input helpers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>
#include "kernels/adam_hyper.hpp"
#include "kernels/half_convert.hpp"

namespace zk::ref {

// n random 16-bit values (as raw bits) drawn from N(0, sigma), with a few larger outliers.
inline std::vector<uint16_t> random_half16(std::mt19937_64& rng, int64_t n, bool bf16, double sigma = 1.0) {
  std::normal_distribution<float> d(0.0f, static_cast<float>(sigma));
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<uint16_t> out(static_cast<size_t>(n));
  for (auto& h : out) h = float_to_half16(d(rng) * (pick(rng) == 0 ? 8.0f : 1.0f), bf16);
  return out;
}

inline std::vector<double> to_double(const std::vector<uint16_t>& h, bool bf16) {
  std::vector<double> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = half16_to_float(h[i], bf16);
  return out;
}

// Exact absmax / qmax of x[begin, end).
inline double block_step(const double* x, int64_t len, int qmax) {
  double amax = 0.0;
  for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax / qmax;
}

// One Adam/AdamW step in double from the given fp32 state; returns new (p, m, v) and the magnitude
// of the terms that make up p (|p| + |decay term| + |Adam term with m's terms taken by absolute value|),
// the scale against which fp32 rounding of the update is judged.
struct AdamOut { double p, m, v, p_terms, m_terms, v_terms; };
inline AdamOut adam(double p, double m, double v, double g, const AdamHyper& h) {
  g *= h.grad_scale;
  if (!h.adamw) g += h.weight_decay * p;
  const double m_terms = std::fabs(h.beta1 * m) + std::fabs((1.0 - h.beta1) * g);
  const double p_old = std::fabs(p);
  const double v_terms = std::fabs(h.beta2 * v) + (1.0 - h.beta2) * g * g;
  m = h.beta1 * m + (1.0 - h.beta1) * g;
  v = h.beta2 * v + (1.0 - h.beta2) * g * g;
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step));
  const double denom = std::sqrt(v) / std::sqrt(bc2) + h.eps;
  const double decay = h.adamw ? static_cast<double>(h.lr) * h.weight_decay * p : 0.0;
  p -= decay;
  p -= (h.lr / bc1) * m / denom;
  return {p, m, v, p_old + std::fabs(decay) + (h.lr / bc1) * m_terms / denom, m_terms, v_terms};
}

// fp32-rounding tolerance for the new parameter: about 8 ulps of the magnitude of its terms.
inline double adam_tolerance(const AdamOut& r) { return 1e-6 * r.p_terms + 1e-30; }
inline double adam_m_tolerance(const AdamOut& r) { return 1e-6 * r.m_terms + 1e-30; }
inline double adam_v_tolerance(const AdamOut& r) { return 1e-6 * r.v_terms + 1e-30; }

// Reference qgZ LoCo quantization of x (one block-partitioned vector, blocks of `block`), in double:
// returns the dequantized values and updates err (as doubles; the kernels store err rounded to 16 bits).
inline std::vector<double> loco_quant_dequant(const std::vector<double>& x, std::vector<double>& err, int64_t block,
                                              double beta, bool reset, bool feedback, int qmax = 7) {
  std::vector<double> out(x.size());
  for (size_t b = 0; b < x.size(); b += static_cast<size_t>(block)) {
    const size_t e = std::min(x.size(), b + static_cast<size_t>(block));
    std::vector<double> c(x.begin() + static_cast<int64_t>(b), x.begin() + static_cast<int64_t>(e));
    if (feedback && !reset)
      for (size_t i = b; i < e; ++i) c[i - b] += err[i];
    const double step = block_step(c.data(), static_cast<int64_t>(c.size()), qmax);
    for (size_t i = b; i < e; ++i) {
      const double q = step > 0 ? std::clamp(std::nearbyint(c[i - b] / step), -double(qmax), double(qmax)) : 0.0;
      out[i] = q * step;
      if (feedback) err[i] = beta * (reset ? 0.0 : err[i]) + (1.0 - beta) * (c[i - b] - out[i]);
    }
  }
  return out;
}

}  // namespace zk::ref
