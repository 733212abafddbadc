// zrun's own launcher with real processes (/bin/sh as the worker): it sets the rank variables, waits for
// every worker, and a failing worker ends the job naming its rank.
#include "runtime/launch/local_launcher.hpp"

#include <chrono>

#include <gtest/gtest.h>

namespace zrun {
namespace {

std::vector<std::string> sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

TEST(LocalLauncher, AllWorkersSucceedingIsSuccess) {
  LaunchOptions o;
  o.nproc = 3;
  const LaunchResult r = launch_local_workers(sh("exit 0"), o);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.failed_rank, -1);
}

TEST(LocalLauncher, EachWorkerSeesItsRankWorldLocalRankAndMaster) {
  LaunchOptions o;
  o.nproc = 4;
  // Fails unless the variables are consistent: ZRUN_LOCAL_RANK = ZRUN_RANK < ZRUN_WORLD_SIZE = 4.
  const LaunchResult r = launch_local_workers(
      sh("[ \"$ZRUN_WORLD_SIZE\" = 4 ] && [ \"$ZRUN_LOCAL_RANK\" = \"$ZRUN_RANK\" ] && [ \"$ZRUN_RANK\" -lt 4 ] && "
         "[ \"$MASTER_ADDR\" = 127.0.0.1 ] && [ \"$MASTER_PORT\" -gt 0 ]"),
      o);
  EXPECT_EQ(r.exit_code, 0) << r.message;
}

TEST(LocalLauncher, AFailingWorkerStopsTheOthersAndNamesItsRankAndCode) {
  LaunchOptions o;
  o.nproc = 3;
  const auto start = std::chrono::steady_clock::now();
  const LaunchResult r = launch_local_workers(sh("if [ \"$ZRUN_RANK\" = 1 ]; then exit 7; fi; sleep 60"), o);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.failed_rank, 1);
  EXPECT_NE(r.message.find("worker rank 1 exited with code 7"), std::string::npos) << r.message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));  // the sleepers were stopped
}

TEST(LocalLauncher, AWorkerKilledByASignalIsAFailure) {
  LaunchOptions o;
  o.nproc = 2;
  const LaunchResult r = launch_local_workers(sh("if [ \"$ZRUN_RANK\" = 0 ]; then kill -9 $$; fi; sleep 60"), o);
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_EQ(r.failed_rank, 0);
  EXPECT_NE(r.message.find("killed by signal 9"), std::string::npos) << r.message;
}

TEST(LocalLauncher, AnOrdinaryExitCodeIsNotAFailureAndBecomesTheJobsCode) {
  LaunchOptions o;
  o.nproc = 2;
  o.ordinary_exit_codes = {3};
  const LaunchResult r = launch_local_workers(sh("sleep 0.$ZRUN_RANK; exit 3"), o);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.failed_rank, -1);
}

}  // namespace
}  // namespace zrun
