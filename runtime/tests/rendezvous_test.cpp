// The TCP rendezvous with real local processes: every rank gets rank 0's blob, a missing rank 0 ends in a
// clear error within the timeout.
#include "runtime/launch/rendezvous.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace zrun {
namespace {

// Child exit codes: 0 = got the expected blob, 1 = wrong blob, 2 = error thrown.
int child_rank(int rank, int world, const std::vector<std::uint8_t>& blob, RendezvousOptions o) {
  try {
    const auto got = rendezvous(rank, world, rank == 0 ? blob : std::vector<std::uint8_t>{}, o);
    return got == blob ? 0 : 1;
  } catch (const std::exception&) {
    return 2;
  }
}

std::vector<int> run_ranks(const std::vector<int>& ranks, int world, const std::vector<std::uint8_t>& blob,
                           const RendezvousOptions& o, int delay_rank0_ms = 0) {
  std::vector<pid_t> pids;
  for (int rank : ranks) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (rank == 0 && delay_rank0_ms) ::usleep(delay_rank0_ms * 1000);
      ::_exit(child_rank(rank, world, blob, o));
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return codes;
}

std::vector<std::uint8_t> some_blob() {
  std::vector<std::uint8_t> b(128);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 7 + 3);
  return b;
}

TEST(Rendezvous, FourLocalProcessesAllReceiveRankZerosBlob) {
  RendezvousOptions o{"127.0.0.1", pick_free_local_port(), 20};
  EXPECT_EQ(run_ranks({0, 1, 2, 3}, 4, some_blob(), o), (std::vector<int>{0, 0, 0, 0}));
}

TEST(Rendezvous, RanksStartedBeforeRankZeroRetryUntilItListens) {
  RendezvousOptions o{"localhost", pick_free_local_port(), 20};
  EXPECT_EQ(run_ranks({0, 1, 2}, 3, some_blob(), o, /*delay_rank0_ms=*/1500), (std::vector<int>{0, 0, 0}));
}

TEST(Rendezvous, NoRankZeroEndsInAnErrorNamingRankAndAddressWithinTheTimeout) {
  RendezvousOptions o{"127.0.0.1", pick_free_local_port(), 1.0};
  const auto start = std::chrono::steady_clock::now();
  try {
    rendezvous(1, 2, {}, o);
    FAIL() << "no error";
  } catch (const RendezvousError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1: could not reach rank 0's rendezvous at 127.0.0.1:" + std::to_string(o.master_port)),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("within 1 s"), std::string::npos) << m;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Rendezvous, RankZeroWaitingForAMissingRankNamesItWithinTheTimeout) {
  RendezvousOptions o{"127.0.0.1", pick_free_local_port(), 1.0};
  const auto start = std::chrono::steady_clock::now();
  try {
    rendezvous(0, 3, some_blob(), o);
    FAIL() << "no error";
  } catch (const RendezvousError& e) {
    EXPECT_NE(std::string(e.what()).find("only 1 of 3 ranks arrived"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing ranks: 1, 2"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Rendezvous, AWorldOfOneNeedsNoNetwork) {
  RendezvousOptions o{"no-such-host.invalid", 1, 0.1};
  EXPECT_EQ(rendezvous(0, 1, some_blob(), o), some_blob());
}

}  // namespace
}  // namespace zrun
