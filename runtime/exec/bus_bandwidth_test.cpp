// nccl-tests' bus bandwidth conventions, as zrun reports its collectives.
#include "runtime/exec/bus_bandwidth.hpp"

#include <gtest/gtest.h>

namespace zrun {
namespace {

TEST(BusBandwidth, FollowsNcclTestsFactors) {
  using zsim::CollectiveKind;
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::all_gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::reduce_scatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::reduce, 8), 1.0);
  // 1 GiB all-gathered on 4 ranks in 2.5 ms: 429.5 GB/s algorithm, 322.1 GB/s bus.
  EXPECT_NEAR(bus_GBps(CollectiveKind::all_gather, 4, 1LL << 30, 2.5e-3), 322.1225472, 1e-6);
  EXPECT_EQ(algorithm_GBps(100, 0), 0.0);
}

}  // namespace
}  // namespace zrun
