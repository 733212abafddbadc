#include "sim/plan/quantization.hpp"

#include <gtest/gtest.h>

using namespace zsim;

TEST(Quantization, QwzGroupsTargetAtMost8000Elements) {
  EXPECT_EQ(qwz_groups(64000), 8);         // exactly 8000 per group
  EXPECT_EQ(qwz_groups(1'000'000), 125);   // 8000 per group
  EXPECT_EQ(qwz_groups(1 << 20), 256);     // power of two: first 8*g dividing 2^20 above 132 is g = 256
}

TEST(Quantization, QwzPartitionIsOneBytePerElementPlusFp32Scales) {
  const QuantizedSize q = qwz_partition_bytes(1'000'000);
  EXPECT_EQ(q.data, 1'000'000);
  EXPECT_EQ(q.scales, 4 * 125);
}

TEST(Quantization, QgzTwoHopsAreInt4WithGroupScales) {
  const QgzSizes q = qgz_sizes(4096, 4096, 16, 8);
  EXPECT_EQ(q.intra.data, 4096 * 4096 / 2);
  EXPECT_EQ(q.intra.scales, 4 * 4096);
  EXPECT_EQ(q.inter.data, 4096 * 4096 / 8 / 2);
  EXPECT_EQ(q.inter.scales, 4 * 4096 / 8);
}

TEST(Quantization, QgzSkipsVectorsAndIndivisibleMatrices) {
  EXPECT_FALSE(qgz_applies(4096, 0, 16));
  EXPECT_FALSE(qgz_applies(5, 3, 16));
  EXPECT_TRUE(qgz_applies(64, 64, 16));
}
