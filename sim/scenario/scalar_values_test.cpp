#include "sim/scenario/scalar_values.hpp"

#include <gtest/gtest.h>

#include "sim/scenario/edit_distance.hpp"

namespace zsim {

TEST(ScalarValues, IntegersAcceptDeepSpeedStyleScientificLiterals) {
  EXPECT_EQ(parse_integer("500000000"), 500000000);
  EXPECT_EQ(parse_integer("5e8"), 500000000);
  EXPECT_EQ(parse_integer("500_000_000"), 500000000);
  EXPECT_EQ(parse_integer("-3"), -3);
}

TEST(ScalarValues, IntegersRejectFractionsWordsAndOverflow) {
  EXPECT_FALSE(parse_integer("2.5"));
  EXPECT_FALSE(parse_integer("three"));
  EXPECT_FALSE(parse_integer("1e30"));
  EXPECT_FALSE(parse_integer(""));
  EXPECT_FALSE(parse_integer("nan"));
}

TEST(ScalarValues, BytesAcceptDecimalAndBinaryUnits) {
  EXPECT_EQ(parse_bytes("80GiB"), 80 * kGiB);
  EXPECT_EQ(parse_bytes("2 TB"), 2'000'000'000'000);
  EXPECT_EQ(parse_bytes("1.5GB"), 1'500'000'000);
  EXPECT_EQ(parse_bytes("4096"), 4096);
  EXPECT_FALSE(parse_bytes("80 parsecs"));
  EXPECT_FALSE(parse_bytes("GiB"));
}

TEST(ScalarValues, BooleansAcceptYamlSpellings) {
  EXPECT_EQ(parse_bool("true"), true);
  EXPECT_EQ(parse_bool("False"), false);
  EXPECT_EQ(parse_bool("yes"), true);
  EXPECT_FALSE(parse_bool("1"));
}

TEST(EditDistance, SuggestsTheClosestNameOnlyWhenClose) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
  EXPECT_EQ(nearest_name("stgae", {"stage", "overlap_comm"}), "stage");
  EXPECT_EQ(nearest_name("completely_different", {"stage", "overlap_comm"}), "");
  EXPECT_EQ(nearest_name("a", {"aio", "amp"}), "");
}

}  // namespace zsim
