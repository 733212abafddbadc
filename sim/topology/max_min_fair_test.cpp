// Max-min fair sharing: progressive filling gives bottlenecked flows equal shares and lets the others
// take what is left.
#include "sim/topology/max_min_fair.hpp"

#include <cmath>

#include <gtest/gtest.h>

namespace zsim {
namespace {

TEST(MaxMinFair, TwoFlowsOnOneLinkEachGetHalf) {
  const auto r = max_min_fair_rates({{{0, 1.0}}, {{0, 1.0}}}, {100e9});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0], 50e9);
  EXPECT_DOUBLE_EQ(r[1], 50e9);
}

TEST(MaxMinFair, ALoneFlowGetsItsBottleneckLink) {
  const auto r = max_min_fair_rates({{{0, 1.0}, {1, 1.0}}}, {100e9, 25e9});
  EXPECT_DOUBLE_EQ(r[0], 25e9);
}

TEST(MaxMinFair, AFlowLimitedElsewhereLeavesTheRestToOthers) {
  // Flow 0 crosses a 10 GB/s link and the shared 100 GB/s link; flow 1 only the shared one.
  const auto r = max_min_fair_rates({{{0, 1.0}, {1, 1.0}}, {{1, 1.0}}}, {10e9, 100e9});
  EXPECT_DOUBLE_EQ(r[0], 10e9);
  EXPECT_DOUBLE_EQ(r[1], 90e9);
}

TEST(MaxMinFair, CoefficientsScaleTheLinkLoadOfAFlow) {
  // A flow that puts 2 link bytes per byte on a 100 GB/s link alone runs at 50 GB/s.
  EXPECT_DOUBLE_EQ(max_min_fair_rates({{{0, 2.0}}}, {100e9})[0], 50e9);
  // With a second plain flow both run at the same rate r: 2r + r = 100.
  const auto r = max_min_fair_rates({{{0, 2.0}}, {{0, 1.0}}}, {90e9});
  EXPECT_DOUBLE_EQ(r[0], 30e9);
  EXPECT_DOUBLE_EQ(r[1], 30e9);
}

TEST(MaxMinFair, NoLinkSaturatesBeyondItsCapacity) {
  const std::vector<FlowPath> flows = {{{0, 1.0}, {2, 0.5}}, {{1, 1.0}, {2, 1.0}}, {{0, 1.0}}, {{2, 0.25}}};
  const std::vector<double> cap = {40e9, 70e9, 30e9};
  const auto r = max_min_fair_rates(flows, cap);
  for (size_t l = 0; l < cap.size(); ++l) {
    double load = 0;
    for (size_t f = 0; f < flows.size(); ++f)
      for (const FlowUse& u : flows[f])
        if (u.link == static_cast<int>(l)) load += u.coefficient * r[f];
    EXPECT_LE(load, cap[l] * (1 + 1e-12)) << l;
  }
}

TEST(MaxMinFair, AFlowWithoutLinksIsUnbounded) {
  EXPECT_TRUE(std::isinf(max_min_fair_rates({{}}, {1e9})[0]));
}

}  // namespace
}  // namespace zsim
