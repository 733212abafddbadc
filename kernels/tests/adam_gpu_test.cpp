// Fused GPU Adam/AdamW against the double-precision reference (skipped without a GPU).
#include <gtest/gtest.h>
#include <cmath>
#include <random>
#include "kernels/fused_adam.hpp"
#include "kernels/tests/gpu_test_util.hpp"
#include "kernels/tests/reference.hpp"

namespace zk {
namespace {

using test::DeviceBuffer;

void check_adam(int64_t n, const AdamHyper& h, Half16 gfmt, Half16 wfmt, uint64_t seed) {
  SCOPED_TRACE("n=" + std::to_string(n) + " step=" + std::to_string(h.step));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> p(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) { p[i] = d(rng); m[i] = 0.1f * d(rng); v[i] = 0.01f * u(rng); }
  const auto g = ref::random_half16(rng, n, gfmt == Half16::bf16);
  DeviceBuffer<float> pd(p), md(m), vd(v);
  DeviceBuffer<uint16_t> gd(g), wd(n);
  fused_adam(pd.get(), md.get(), vd.get(), gd.get(), gfmt, wd.get(), wfmt, n, h, nullptr);
  const auto po = pd.download(), mo = md.download(), vo = vd.download();
  const auto wo = wd.download();
  for (int64_t i = 0; i < n; ++i) {
    const double gi = half16_to_float(g[i], gfmt == Half16::bf16);
    const auto r = ref::adam(p[i], m[i], v[i], gi, h);
    ASSERT_NEAR(po[i], r.p, ref::adam_tolerance(r)) << "param " << i;
    ASSERT_NEAR(mo[i], r.m, ref::adam_m_tolerance(r)) << i;
    ASSERT_NEAR(vo[i], r.v, ref::adam_v_tolerance(r)) << i;
    ASSERT_EQ(wo[i], float_to_half16(po[i], wfmt == Half16::bf16)) << "16-bit weight " << i;
  }
}

TEST(FusedAdamGpu, AdamWMatchesDoubleReferenceAcrossSizes) {
  ZK_REQUIRE_GPU();
  AdamHyper h; h.lr = 1e-2f; h.weight_decay = 0.1f; h.adamw = true; h.step = 1;
  uint64_t seed = 1;
  for (int64_t n : {1, 3, 1001, (1 << 22) + 3}) check_adam(n, h, Half16::bf16, Half16::bf16, seed++);
}

TEST(FusedAdamGpu, L2AdamWithGradScaleLateStepAndFp16MatchesReference) {
  ZK_REQUIRE_GPU();
  AdamHyper h; h.lr = 3e-4f; h.weight_decay = 0.01f; h.adamw = false; h.grad_scale = 1.0f / 1024; h.step = 1000;
  check_adam(100003, h, Half16::fp16, Half16::fp16, 7);
  check_adam(5, h, Half16::bf16, Half16::fp16, 8);
}

// fp32 training: fp32 gradients in, the updated master written to fp32 weights exactly.
TEST(FusedAdamGpu, Fp32GradientsAndWeightsMatchTheReference) {
  ZK_REQUIRE_GPU();
  AdamHyper h; h.lr = 1e-2f; h.weight_decay = 0.1f; h.adamw = true; h.step = 3;
  for (int64_t n : {1, 5, 100003}) {
    std::mt19937_64 rng(static_cast<uint64_t>(n));
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<float> p(n), m(n), v(n), g(n);
    for (int64_t i = 0; i < n; ++i) { p[i] = d(rng); m[i] = 0.1f * d(rng); v[i] = 0.01f * u(rng); g[i] = d(rng); }
    DeviceBuffer<float> pd(p), md(m), vd(v), gd(g), wd(n);
    fused_adam_fp32(pd.get(), md.get(), vd.get(), gd.get(), wd.get(), n, h, nullptr);
    const auto po = pd.download(), wo = wd.download();
    for (int64_t i = 0; i < n; ++i) {
      const auto r = ref::adam(p[i], m[i], v[i], g[i], h);
      ASSERT_NEAR(po[i], r.p, ref::adam_tolerance(r)) << "param " << i;
      ASSERT_EQ(wo[i], po[i]) << "fp32 weight " << i;
    }
  }
}

}  // namespace
}  // namespace zk
