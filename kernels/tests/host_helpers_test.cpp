// Host-side helpers: 16-bit conversions, int4 packing, DeepSpeed's qwZ block-size rule, and the
// qgZ swizzle map.
#include <gtest/gtest.h>
#include <cmath>
#include <random>
#include <set>
#include "kernels/half_convert.hpp"
#include "kernels/int4_pack.hpp"
#include "kernels/qgz_quant.hpp"
#include "kernels/qwz_quant.hpp"

namespace zk {
namespace {

TEST(HalfConvert, EveryFiniteBf16AndFp16RoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<uint16_t>(h);
    const float fb = bf16_to_float(b);
    if (std::isfinite(fb)) {
      ASSERT_EQ(float_to_bf16(fb), b) << h;
    }
    const float ff = fp16_to_float(b);
    if (std::isfinite(ff)) {
      ASSERT_EQ(float_to_fp16(ff), b) << h;
    }
  }
}

TEST(HalfConvert, RoundsToNearestEvenBetweenNeighbours) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  for (int i = 0; i < 200000; ++i) {
    const float x = d(rng) * (i % 2 ? 1.0f : 1e-6f);
    for (bool bf16 : {true, false}) {
      const uint16_t h = float_to_half16(x, bf16);
      const double y = half16_to_float(h, bf16);
      if (!std::isfinite(y)) continue;
      // No other representable value is closer than the result.
      const double up = half16_to_float(static_cast<uint16_t>(h + 1), bf16);
      const double dn = half16_to_float(static_cast<uint16_t>(h - 1), bf16);
      const double err = std::fabs(y - x);
      if (std::isfinite(up)) {
        ASSERT_LE(err, std::fabs(up - x)) << x;
      }
      if (std::isfinite(dn)) {
        ASSERT_LE(err, std::fabs(dn - x)) << x;
      }
    }
  }
}

TEST(Int4Pack, EveryPairOfValuesRoundTripsExactly) {
  for (int lo = -8; lo <= 7; ++lo)
    for (int hi = -8; hi <= 7; ++hi) {
      const uint8_t byte = pack_int4_pair(lo, hi);
      EXPECT_EQ(unpack_int4(&byte, 0), lo);
      EXPECT_EQ(unpack_int4(&byte, 1), hi);
    }
}

TEST(QwzBlockSize, FollowsDeepSpeedGroupRule) {
  // 4096x4096: ceil(2^24/8000)=2098 groups, raised to the next g with 2^24 % (8g) == 0: 4096; no doubling
  // (2^24/4096 = 4096 <= 8000) -> 4096 elements per group.
  EXPECT_EQ(qwz_deepspeed_block_elems(int64_t{1} << 24), 4096);
  EXPECT_EQ(qwz_deepspeed_block_elems(8000), 8000);   // one group: 8000 % 8 == 0, not > 8000
  EXPECT_EQ(qwz_deepspeed_block_elems(1), 1);
  // 7 elements: no g < 7 with 7 % (8g) == 0, so g = 7 groups of one element.
  EXPECT_EQ(qwz_deepspeed_block_elems(7), 1);
  // The block always divides n.
  for (int64_t n : {1000, 12288, 50257 * 768, 4096 * 11008})
    EXPECT_EQ(n % qwz_deepspeed_block_elems(n), 0) << n;
}

TEST(QgzSwizzle, TwoNodesFourDevicesGivesDeepSpeedOrder) {
  // DeepSpeed's comment: partitions 0..7 (2 nodes x 4 devices) are laid out as [0 4 1 5 2 6 3 7].
  const int expected_at_slot[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int p = 0; p < 8; ++p) EXPECT_EQ(expected_at_slot[qgz_swizzled_slot(p, 2, 4)], p);
}

TEST(QgzSwizzle, IsAPermutationWithOneContiguousChunkPerLocalDevice) {
  for (int nodes : {1, 2, 3, 8})
    for (int dpn : {1, 2, 8}) {
      std::set<int64_t> slots;
      for (int p = 0; p < nodes * dpn; ++p) {
        const int64_t s = qgz_swizzled_slot(p, nodes, dpn);
        slots.insert(s);
        EXPECT_EQ(s / nodes, p % dpn) << "partition " << p << " must be in the chunk of its local device";
      }
      EXPECT_EQ(static_cast<int>(slots.size()), nodes * dpn);
    }
}

}  // namespace
}  // namespace zk
