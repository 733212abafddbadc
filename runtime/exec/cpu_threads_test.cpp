// A rank's CPU Adam threads: the scenario's cores per rank.
#include "runtime/exec/cpu_threads.hpp"

#include <gtest/gtest.h>

namespace zrun {
namespace {

TEST(CpuAdamThreads, AreTheScenariosCoresPerRank) {
  EXPECT_EQ(cpu_adam_threads(16, 1), 16);  // the validation suite's host.cores on one GPU
  EXPECT_EQ(cpu_adam_threads(16, 2), 8);   // two ranks on the node share its 16 cores
  EXPECT_EQ(cpu_adam_threads(112, 8), 14);
  EXPECT_EQ(cpu_adam_threads(10, 4), 2);   // integer division
}

TEST(CpuAdamThreads, AreAtLeastOneAndZeroWhenTheScenarioGivesNoCores) {
  EXPECT_EQ(cpu_adam_threads(4, 8), 1);
  EXPECT_EQ(cpu_adam_threads(0, 2), 0);  // OpenMP's default
  EXPECT_EQ(cpu_adam_threads(16, 0), 16);
}

}  // namespace
}  // namespace zrun
