// qwZ int8 block quantize/dequantize kernels against the double reference (skipped without a GPU).
#include <gtest/gtest.h>
#include <cmath>
#include <random>
#include "kernels/qwz_quant.hpp"
#include "kernels/tests/gpu_test_util.hpp"
#include "kernels/tests/reference.hpp"

namespace zk {
namespace {

using test::DeviceBuffer;

void check_quantize(int64_t n, int64_t block, Half16 fmt, uint64_t seed) {
  SCOPED_TRACE("n=" + std::to_string(n) + " block=" + std::to_string(block) + (fmt == Half16::bf16 ? " bf16" : " fp16"));
  const bool bf16 = fmt == Half16::bf16;
  std::mt19937_64 rng(seed);
  const auto h = ref::random_half16(rng, n, bf16);
  const auto x = ref::to_double(h, bf16);
  const int64_t nb = qwz_num_blocks(n, block);
  DeviceBuffer<uint16_t> in(h);
  DeviceBuffer<int8_t> q(n);
  DeviceBuffer<float> steps(nb);
  DeviceBuffer<uint16_t> back(n);
  qwz_quantize(in.get(), fmt, n, block, q.get(), steps.get(), nullptr);
  qwz_dequantize(q.get(), steps.get(), n, block, back.get(), fmt, nullptr);
  const auto qh = q.download();
  const auto sh = steps.download();
  const auto bh = back.download();
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t len = std::min(block, n - b * block);
    const double want = ref::block_step(x.data() + b * block, len, 127);
    ASSERT_NEAR(sh[b], want, 1e-6 * want) << "step of block " << b;
  }
  for (int64_t i = 0; i < n; ++i) {
    const double step = sh[i / block];
    const double deq = qh[i] * step;
    ASSERT_LE(std::abs(static_cast<int>(qh[i])), 127);
    ASSERT_LE(std::fabs(deq - x[i]), 0.5 * step * (1 + 1e-5) + 1e-30) << "element " << i;
    // Dequantize kernel: q * step rounded once to the 16-bit format.
    ASSERT_EQ(bh[i], float_to_half16(static_cast<float>(qh[i]) * sh[i / block], bf16)) << "dequantized " << i;
  }
}

TEST(QwzGpu, QuantizeWithinHalfStepAndDequantizeExactAcrossSizes) {
  ZK_REQUIRE_GPU();
  uint64_t seed = 1;
  for (Half16 fmt : {Half16::bf16, Half16::fp16})
    for (int64_t n : {1, 7, 2048, 2049, 100003, (1 << 22) + 13})
      check_quantize(n, kQwzDefaultBlockElems, fmt, seed++);
}

TEST(QwzGpu, BlockSizesNotMultipleOfEightAndDeepSpeedsChoiceWork) {
  ZK_REQUIRE_GPU();
  check_quantize(10007, 1000, Half16::bf16, 11);
  check_quantize(10007, 37, Half16::fp16, 12);
  check_quantize(1, 1, Half16::bf16, 13);
  const int64_t n = 4096 * 1024;
  check_quantize(n, qwz_deepspeed_block_elems(n), Half16::bf16, 14);
  check_quantize(3 * 8000 + 8, 16384, Half16::bf16, 15);  // block larger than 256 threads x 8 covers at once
}

TEST(QwzGpu, AllZeroBlockQuantizesToZeroWithZeroStep) {
  ZK_REQUIRE_GPU();
  DeviceBuffer<uint16_t> in(std::vector<uint16_t>(300, 0));
  DeviceBuffer<int8_t> q(300);
  DeviceBuffer<float> steps(2);
  qwz_quantize(in.get(), Half16::bf16, 300, 256, q.get(), steps.get(), nullptr);
  for (auto v : q.download()) ASSERT_EQ(v, 0);
  for (auto s : steps.download()) ASSERT_EQ(s, 0.0f);
}

}  // namespace
}  // namespace zk
