// The TCP rendezvous with real local processes: every rank gets rank 0's blob, a missing rank 0 ends in a
// clear error within the timeout, and rank 0 can serve on a listening socket zrun's launcher opened for it
// (whose port nothing else can take meanwhile).
#include "runtime/launch/rendezvous.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/tests/port_probe.hpp"

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

// Runs each rank in a child process; rank 0 serves on `rank0_listener_fd` when given (>= 0), which the parent
// closes once the children have it, as zrun's launcher does.
std::vector<int> run_ranks(const std::vector<int>& ranks, int world, const std::vector<std::uint8_t>& blob,
                           const RendezvousOptions& o, int delay_rank0_ms = 0, int rank0_listener_fd = -1) {
  std::vector<pid_t> pids;
  for (int rank : ranks) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (rank == 0 && delay_rank0_ms) ::usleep(delay_rank0_ms * 1000);
      RendezvousOptions mine = o;
      if (rank == 0) mine.listener_fd = rank0_listener_fd;
      ::_exit(child_rank(rank, world, blob, mine));
    }
    pids.push_back(pid);
  }
  if (rank0_listener_fd >= 0) ::close(rank0_listener_fd);
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

using zrun::test::bind_error;

TEST(Rendezvous, FourLocalProcessesMeetOnTheListenerRankZeroInherited) {
  const RendezvousListener l = open_rendezvous_listener();
  RendezvousOptions o{"127.0.0.1", l.port, 20};
  // Rank 0 comes late: the others' connections wait on the already listening socket.
  EXPECT_EQ(run_ranks({0, 1, 2, 3}, 4, some_blob(), o, /*delay_rank0_ms=*/500, l.fd), (std::vector<int>{0, 0, 0, 0}));
}

TEST(Rendezvous, WhileTheLaunchersListenerIsOpenNoOtherSocketCanBindItsPort) {
  const RendezvousListener l = open_rendezvous_listener();
  EXPECT_EQ(bind_error(l.port), EADDRINUSE);
  // Nor can a rank 0 that would bind MASTER_PORT itself: the failure of the original race, now impossible
  // for another process.
  RendezvousOptions o{"127.0.0.1", l.port, 1.0};
  try {
    rendezvous(0, 2, some_blob(), o);
    FAIL() << "no error";
  } catch (const RendezvousError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot listen on port " + std::to_string(l.port)), std::string::npos)
        << e.what();
  }
  ::close(l.fd);
  EXPECT_EQ(bind_error(l.port), 0);  // closed: the port is free again
}

TEST(Rendezvous, APortFromPickFreeLocalPortIsNotHeldAndAnyoneCanTakeIt) {
  EXPECT_EQ(bind_error(pick_free_local_port()), 0);  // why zrun's launcher no longer relies on it
}

// Expects rank 0's rendezvous on `listener_fd` to fail at once with an error naming ZRUN_RENDEZVOUS_FD and `why`.
void expect_listener_rejected(int listener_fd, int port, const std::string& why) {
  RendezvousOptions o{"127.0.0.1", port, 1.0};
  o.listener_fd = listener_fd;
  try {
    rendezvous(0, 2, some_blob(), o);
    ADD_FAILURE() << "no error for " << why;
  } catch (const RendezvousError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ZRUN_RENDEZVOUS_FD=" + std::to_string(listener_fd)), std::string::npos) << m;
    EXPECT_NE(m.find(why), std::string::npos) << m;
  }
}

TEST(Rendezvous, AnInheritedDescriptorThatIsNotAListeningTcpSocketOnThePortIsAClearError) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  expect_listener_rejected(pipe_fds[0], 1234, "is not a socket");
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  expect_listener_rejected(pipe_fds[0], 1234, "is not an open file descriptor");

  const int unix_socket = ::socket(AF_UNIX, SOCK_STREAM, 0);
  expect_listener_rejected(unix_socket, 1234, "is not a TCP socket");
  ::close(unix_socket);

  const int not_listening = ::socket(AF_INET, SOCK_STREAM, 0);
  expect_listener_rejected(not_listening, 1234, "is not listening");
  ::close(not_listening);

  const RendezvousListener l = open_rendezvous_listener();
  expect_listener_rejected(l.fd, 1, "listens on port " + std::to_string(l.port) + ", not on the rendezvous port 1");
  ::close(l.fd);
}

}  // namespace
}  // namespace zrun
