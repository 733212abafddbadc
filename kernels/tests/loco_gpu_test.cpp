// LoCo error feedback fused into the qgZ kernels (skipped without a GPU): the error update rule, the
// reset, and the 100-step accumulated-error experiment on the kernel itself.
#include <gtest/gtest.h>
#include <cmath>
#include <cstdio>
#include <random>
#include "kernels/int4_pack.hpp"
#include "kernels/qgz_quant.hpp"
#include "kernels/tests/gpu_test_util.hpp"
#include "kernels/tests/reference.hpp"

namespace zk {
namespace {

using test::DeviceBuffer;

// One-rank shape: the swizzle is the identity, so element i is at nibble i.
QgzShape one_rank(int64_t n, int64_t block) { return QgzShape{n, 1, 1, block}; }

TEST(LocoGpu, ErrorUpdateFollowsTheRuleForTheQuantizedValue) {
  ZK_REQUIRE_GPU();
  for (int64_t n : {int64_t{2}, int64_t{1002}, int64_t{1 << 20}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto s = one_rank(n, 2048);
    std::mt19937_64 rng(n);
    const auto g = ref::random_half16(rng, n, true);
    const auto e = ref::random_half16(rng, n, true, 0.05);
    DeviceBuffer<uint16_t> gd(g), ed(e);
    DeviceBuffer<uint8_t> q(n / 2);
    DeviceBuffer<float> st(s.blocks_per_partition());
    const LocoParams loco{0.8f, 1024, 5};  // not a reset step
    qgz_swizzled_quantize_loco(gd.get(), Half16::bf16, ed.get(), loco, s, q.get(), st.get(), nullptr);
    const auto qh = q.download();
    const auto sh = st.download();
    const auto eh = ed.download();
    for (int64_t i = 0; i < n; ++i) {
      const double c = static_cast<double>(bf16_to_float(g[i])) + bf16_to_float(e[i]);
      const double step = sh[i / 2048];
      const double deq = unpack_int4(qh.data(), i) * step;
      ASSERT_LE(std::fabs(deq - c), 0.5 * step * (1 + 1e-5) + 1e-30) << i;
      const double want = 0.8 * bf16_to_float(e[i]) + 0.2 * (c - deq);
      // bf16 rounding of the stored error plus fp32 rounding of c - deQ.
      ASSERT_NEAR(bf16_to_float(eh[i]), want, std::fabs(want) / 128 + 1e-6 * std::fabs(c)) << "error of " << i;
    }
  }
}

TEST(LocoGpu, ResetStepIgnoresTheStoredError) {
  ZK_REQUIRE_GPU();
  const int64_t n = 4096;
  const auto s = one_rank(n, 2048);
  std::mt19937_64 rng(3);
  const auto g = ref::random_half16(rng, n, false);
  DeviceBuffer<uint16_t> gd(g), err(n);  // err stays poisoned (NaN): a reset must not read it
  DeviceBuffer<uint8_t> q_loco(n / 2), q_plain(n / 2);
  DeviceBuffer<float> s_loco(2), s_plain(2);
  qgz_swizzled_quantize_loco(gd.get(), Half16::fp16, err.get(), LocoParams{0.8f, 10, 20}, s, q_loco.get(),
                             s_loco.get(), nullptr);
  qgz_swizzled_quantize(gd.get(), Half16::fp16, s, q_plain.get(), s_plain.get(), nullptr);
  EXPECT_EQ(q_loco.download(), q_plain.download());
  EXPECT_EQ(s_loco.download(), s_plain.download());
  const auto eh = err.download();
  const auto qh = q_plain.download();
  const auto sh = s_plain.download();
  for (int64_t i = 0; i < n; ++i) {
    const double c = fp16_to_float(g[i]);
    const double want = 0.2 * (c - unpack_int4(qh.data(), i) * sh[i / 2048]);
    ASSERT_NEAR(fp16_to_float(eh[i]), want, std::fabs(want) / 1024 + 1e-6 * std::fabs(c) + 3e-8) << i;  // 3e-8: half the fp16 subnormal step
  }
}

TEST(LocoGpu, ReduceRequantErrorUpdateFollowsTheRule) {
  ZK_REQUIRE_GPU();
  const int k = 4, m = 2;
  const int64_t P = 3000, block = 2048, nb = 2;
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int> v(-7, 7);
  std::vector<uint8_t> qin(k * m * P / 2);
  for (auto& b : qin) b = pack_int4_pair(v(rng), v(rng));
  std::vector<float> sin(k * m * nb, 0.1f);
  const auto e = ref::random_half16(rng, m * P, true, 0.05);
  DeviceBuffer<uint8_t> qd(qin), qo(m * P / 2);
  DeviceBuffer<float> sd(sin), so(m * nb);
  DeviceBuffer<uint16_t> ed(e);
  qgz_dequant_reduce_requant_loco(qd.get(), sd.get(), k, m, P, block, ed.get(), Half16::bf16, LocoParams{0.5f, 0, 3},
                                  qo.get(), so.get(), nullptr);
  const auto qh = qo.download();
  const auto sh = so.download();
  const auto eh = ed.download();
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < P; ++i) {
      double c = bf16_to_float(e[j * P + i]);
      for (int t = 0; t < k; ++t) c += unpack_int4(qin.data() + (t * m + j) * (P / 2), i) * 0.1;
      const double step = sh[j * nb + i / block];
      const double deq = unpack_int4(qh.data() + j * (P / 2), i) * step;
      ASSERT_LE(std::fabs(deq - c), 0.5 * step * (1 + 1e-4) + 1e-6) << j << "," << i;
      const double want = 0.5 * bf16_to_float(e[j * P + i]) + 0.5 * (c - deq);
      ASSERT_NEAR(bf16_to_float(eh[j * P + i]), want, std::fabs(want) / 128 + 1e-6 * std::fabs(c)) << j << "," << i;
    }
}

// The rule above on the 16-byte path (P and block multiples of 32), for k compiled in and at run time.
void check_reduce_requant_loco(int k, int m, int64_t P, int64_t block, Half16 fmt, uint64_t seed) {
  SCOPED_TRACE("k=" + std::to_string(k) + " m=" + std::to_string(m) + " P=" + std::to_string(P));
  const int64_t nb = (P + block - 1) / block;
  const bool bf16 = fmt == Half16::bf16;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> v(-7, 7);
  std::vector<uint8_t> qin(static_cast<size_t>(k) * m * P / 2);
  for (auto& b : qin) b = pack_int4_pair(v(rng), v(rng));
  std::vector<float> sin(static_cast<size_t>(k) * m * nb, 0.1f);
  const auto e = ref::random_half16(rng, m * P, bf16, 0.05);
  DeviceBuffer<uint8_t> qd(qin), qo(m * P / 2);
  DeviceBuffer<float> sd(sin), so(m * nb);
  DeviceBuffer<uint16_t> ed(e);
  qgz_dequant_reduce_requant_loco(qd.get(), sd.get(), k, m, P, block, ed.get(), fmt, LocoParams{0.5f, 0, 3}, qo.get(),
                                  so.get(), nullptr);
  const auto qh = qo.download();
  const auto sh = so.download();
  const auto eh = ed.download();
  const double rel = bf16 ? 1.0 / 128 : 1.0 / 1024;
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < P; ++i) {
      const double e0 = half16_to_float(e[j * P + i], bf16);
      double c = e0;
      for (int t = 0; t < k; ++t) c += unpack_int4(qin.data() + (t * m + j) * (P / 2), i) * 0.1;
      const double step = sh[j * nb + i / block];
      const double deq = unpack_int4(qh.data() + j * (P / 2), i) * step;
      ASSERT_LE(std::fabs(deq - c), 0.5 * step * (1 + 1e-4) + 1e-6) << j << "," << i;
      const double want = 0.5 * e0 + 0.5 * (c - deq);
      ASSERT_NEAR(half16_to_float(eh[j * P + i], bf16), want, std::fabs(want) * rel + 1e-6 * std::fabs(c) + 3e-8)
          << j << "," << i;
    }
}

TEST(LocoGpu, ReduceRequantErrorUpdateFollowsTheRuleOnTheVectorPath) {
  ZK_REQUIRE_GPU();
  check_reduce_requant_loco(8, 2, 8192, 2048, Half16::bf16, 31);
  check_reduce_requant_loco(2, 3, 4096 + 32, 2048, Half16::fp16, 32);
  check_reduce_requant_loco(4, 2, 4096, 4096, Half16::bf16, 33);
  check_reduce_requant_loco(5, 1, 3 * 16384, 16384, Half16::fp16, 34);
}

// 100 steps of a fixed random gradient stream through the kernel, with and without feedback.
double kernel_accumulated_error(bool feedback, int steps, int64_t n) {
  const auto s = one_rank(n, 256);
  std::mt19937_64 rng(2024);
  std::vector<double> sum_q(n, 0.0), sum_g(n, 0.0);
  DeviceBuffer<uint16_t> gd(n), err(n);
  DeviceBuffer<uint8_t> q(n / 2);
  DeviceBuffer<float> st(s.blocks_per_partition());
  DeviceBuffer<float> deq(n);
  for (int t = 0; t < steps; ++t) {
    const auto g = ref::random_half16(rng, n, true);
    gd.upload(g);
    q.poison();
    st.poison();
    deq.poison();
    if (feedback)
      qgz_swizzled_quantize_loco(gd.get(), Half16::bf16, err.get(), LocoParams{0.8f, 1024, t}, s, q.get(), st.get(), nullptr);
    else
      qgz_swizzled_quantize(gd.get(), Half16::bf16, s, q.get(), st.get(), nullptr);
    qgz_dequant_reduce(q.get(), st.get(), 1, n, 256, 1.0f, deq.get(), OutFormat::f32, nullptr);
    const auto dh = deq.download();
    for (int64_t i = 0; i < n; ++i) { sum_q[i] += dh[i]; sum_g[i] += bf16_to_float(g[i]); }
  }
  double e2 = 0.0;
  for (int64_t i = 0; i < n; ++i) e2 += (sum_q[i] - sum_g[i]) * (sum_q[i] - sum_g[i]);
  return std::sqrt(e2 / n);
}

TEST(LocoGpu, FeedbackShrinksAccumulatedErrorOfHundredStepsSeveralFold) {
  ZK_REQUIRE_GPU();
  const double without = kernel_accumulated_error(false, 100, 1 << 16);
  const double with = kernel_accumulated_error(true, 100, 1 << 16);
  std::printf("LoCo kernel: rms accumulated error without feedback %.4f, with %.4f, factor %.2f\n", without, with,
              without / with);
  EXPECT_GT(without / with, 3.0);
}

}  // namespace
}  // namespace zk
