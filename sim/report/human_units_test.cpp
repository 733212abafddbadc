// Specification of human-readable units: three significant digits, binary units for bytes.
#include "sim/report/human_units.hpp"

#include <gtest/gtest.h>

using namespace zsim;

TEST(HumanBytes, SmallSizesInWholeBytes) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
}

TEST(HumanBytes, BinaryUnitsWithThreeSignificantDigits) {
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(human_bytes(12 * kMiB + 300 * kKiB), "12.3 MiB");
  EXPECT_EQ(human_bytes(80 * kGiB), "80.0 GiB");
  EXPECT_EQ(human_bytes(123 * kGiB), "123 GiB");
  EXPECT_EQ(human_bytes(2048 * kGiB), "2.00 TiB");
}

TEST(HumanBytes, RoundingUpToTheNextUnitSwitchesUnit) {
  EXPECT_EQ(human_bytes(kGiB - 1), "1.00 GiB");
}

TEST(HumanBytes, NegativeSizesKeepTheirSign) {
  EXPECT_EQ(human_bytes(-2 * kGiB), "-2.00 GiB");
  EXPECT_EQ(human_bytes(-5), "-5 B");
}

TEST(HumanCount, DecimalSuffixes) {
  EXPECT_EQ(human_count(950), "950");
  EXPECT_EQ(human_count(12'300), "12.3k");
  EXPECT_EQ(human_count(6'738'415'616), "6.74B");
  EXPECT_EQ(human_count(175'000'000'000), "175B");
  EXPECT_EQ(human_count(1'200'000'000'000), "1.20T");
}
