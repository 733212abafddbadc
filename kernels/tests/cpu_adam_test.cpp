// CPU Adam against the double-precision reference, for every SIMD level this CPU supports.
#include <gtest/gtest.h>
#include <random>
#include <stdexcept>
#include <vector>
#include "kernels/cpu/cpu_adam.hpp"
#include "kernels/tests/reference.hpp"

namespace zk {
namespace {

struct State { std::vector<float> p, m, v, g; };

State random_state(std::mt19937_64& rng, int64_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  State s;
  s.p.resize(n); s.m.resize(n); s.v.resize(n); s.g.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    s.p[i] = d(rng); s.m[i] = 0.1f * d(rng); s.v[i] = 0.01f * u(rng); s.g[i] = d(rng);
  }
  return s;
}

void check_step(SimdLevel level, int64_t n, const AdamHyper& h, Half16 fmt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  State s = random_state(rng, n);
  const State before = s;
  std::vector<uint16_t> w(n, 0x7FC1);  // poison: a NaN in both formats
  cpu_adam_step(s.p.data(), s.m.data(), s.v.data(), s.g.data(), w.data(), fmt, n, h, level);
  const bool bf16 = fmt == Half16::bf16;
  for (int64_t i = 0; i < n; ++i) {
    const auto r = ref::adam(before.p[i], before.m[i], before.v[i], before.g[i], h);
    ASSERT_NEAR(s.p[i], r.p, ref::adam_tolerance(r)) << "param " << i << " of " << n;
    ASSERT_NEAR(s.m[i], r.m, ref::adam_m_tolerance(r)) << i;
    ASSERT_NEAR(s.v[i], r.v, ref::adam_v_tolerance(r)) << i;
    ASSERT_EQ(w[i], float_to_half16(s.p[i], bf16)) << "16-bit weight " << i << " is not the rounded master";
  }
}

std::vector<SimdLevel> supported_levels() {
  std::vector<SimdLevel> out;
  for (auto l : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512})
    if (simd_level_supported(l)) out.push_back(l);
  return out;
}

TEST(CpuAdam, AdamWMatchesDoubleReferenceAtEverySizeAndSimdLevel) {
  AdamHyper h; h.lr = 1e-2f; h.weight_decay = 0.1f; h.adamw = true; h.step = 1;
  uint64_t seed = 1;
  for (auto level : supported_levels())
    for (int64_t n : {1, 15, 17, 1000, 3 * 16384 + 5, 1 << 21}) {
      SCOPED_TRACE(to_string(level) + " n=" + std::to_string(n));
      check_step(level, n, h, Half16::bf16, seed++);
    }
}

TEST(CpuAdam, L2AdamWithGradScaleAndLateStepMatchesReferenceWithFp16Weights) {
  AdamHyper h; h.lr = 3e-4f; h.weight_decay = 0.01f; h.adamw = false; h.grad_scale = 1.0f / 1024; h.step = 1000;
  uint64_t seed = 100;
  for (auto level : supported_levels())
    for (int64_t n : {1, 33, 100003}) {
      SCOPED_TRACE(to_string(level) + " n=" + std::to_string(n));
      check_step(level, n, h, Half16::fp16, seed++);
    }
}

TEST(CpuAdam, BestLevelIsSupportedAndUnsupportedLevelIsRefused) {
  EXPECT_TRUE(simd_level_supported(best_simd_level()));
  if (!simd_level_supported(SimdLevel::avx512)) {
    float x = 0;
    EXPECT_THROW(cpu_adam_step(&x, &x, &x, &x, nullptr, Half16::bf16, 1, AdamHyper{}, SimdLevel::avx512),
                 std::invalid_argument);
  }
}

TEST(CpuAdam, WeightsOutputMayBeOmitted) {
  std::vector<float> p{1.0f}, m{0.0f}, v{0.0f}, g{0.5f};
  AdamHyper h; h.lr = 0.1f; h.weight_decay = 0.0f;
  cpu_adam_step(p.data(), m.data(), v.data(), g.data(), nullptr, Half16::bf16, 1, h);
  // First step of Adam moves by lr * sign(g) (bias-corrected m/sqrt(v) = g/|g|), up to eps.
  EXPECT_NEAR(p[0], 0.9f, 1e-6);
}

// zrun runs each rank's CPU Adam on the scenario's cores per rank: the step on 1 or 3 threads is the step on
// OpenMP's default team, bit for bit (every element is updated on its own).
TEST(CpuAdam, AnExplicitThreadCountGivesTheSameStep) {
  std::mt19937_64 rng(7);
  const int64_t n = 200003;
  const State start = random_state(rng, n);
  AdamHyper h;
  auto run = [&](int threads, std::vector<uint16_t>& w) {
    State s = start;
    w.assign(n, 0);
    cpu_adam_step(s.p.data(), s.m.data(), s.v.data(), s.g.data(), w.data(), Half16::bf16, n, h, best_simd_level(),
                  threads);
    return s;
  };
  std::vector<uint16_t> w0, w1, w3;
  const State d = run(0, w0), one = run(1, w1), three = run(3, w3);
  EXPECT_EQ(one.p, d.p);
  EXPECT_EQ(three.p, d.p);
  EXPECT_EQ(three.m, d.m);
  EXPECT_EQ(three.v, d.v);
  EXPECT_EQ(w1, w0);
  EXPECT_EQ(w3, w0);
}

TEST(CpuAdam, ThreadCountIsTheOneAskedForElseOpenMpsDefault) {
  EXPECT_EQ(cpu_adam_thread_count(5), 5);
  EXPECT_GE(cpu_adam_thread_count(0), 1);
  EXPECT_THROW(cpu_adam_thread_count(-1), std::invalid_argument);
  float x = 0;
  EXPECT_THROW(cpu_adam_step(&x, &x, &x, &x, nullptr, Half16::bf16, 1, AdamHyper{}, SimdLevel::scalar, -2),
               std::invalid_argument);
}

}  // namespace
}  // namespace zk

#include "kernels/cpu/half_to_fp32.hpp"
#include "kernels/half_convert.hpp"

namespace zk {
namespace {

// Every value of a long array (parallel path) and of a short one (the calling thread), written and then added.
TEST(HalfToFp32, WritesThenAddsEveryConvertedValueForBf16AndFp16) {
  for (const Half16 fmt : {Half16::bf16, Half16::fp16})
    for (const int64_t n : {int64_t{1000}, int64_t{1} << 18}) {
      std::vector<uint16_t> h(n);
      std::vector<float> want(n), out(n, -7.0f);
      for (int64_t i = 0; i < n; ++i) {
        const float x = static_cast<float>((i % 2001) - 1000) / 64.0f;
        h[i] = float_to_half16(x, fmt == Half16::bf16);
        want[i] = half16_to_float(h[i], fmt == Half16::bf16);
      }
      half16_to_fp32(h.data(), out.data(), n, fmt, false);
      ASSERT_EQ(out, want);
      half16_to_fp32(h.data(), out.data(), n, fmt, true);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], 2 * want[i]) << i;
    }
}

}  // namespace
}  // namespace zk
