// zrun's own launcher with real processes (/bin/sh as the worker): it sets the rank variables, waits for
// every worker, and a failing worker ends the job naming its rank. The port it picks is held, listening, from
// before any worker starts until rank 0 (and only rank 0) has taken the socket over.
#include "runtime/launch/local_launcher.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include <gtest/gtest.h>

#include "runtime/launch/rendezvous.hpp"
#include "runtime/launch/worker_identity.hpp"
#include "runtime/tests/port_probe.hpp"

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

using zrun::test::bind_error;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory for the workers' notes, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "zrun_launcher_test.XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(LocalLauncher, ThePickedPortCannotBeTakenWhileTheWorkersStartAndOnlyRankZeroHoldsItsSocket) {
  TempDir dir;
  const std::string d = dir.path.string();
  // Rank 0 notes which socket it inherited and the port, then waits for the test's "go"; the others note
  // their open descriptors (and fail if they were told of a socket).
  const std::string script =
      "if [ \"$ZRUN_RANK\" = 0 ]; then "
      "  readlink /proc/$$/fd/$ZRUN_RENDEZVOUS_FD > " + d + "/socket0 || exit 10; "
      "  echo $MASTER_PORT > " + d + "/port.tmp && mv " + d + "/port.tmp " + d + "/port; "
      "  i=0; while [ ! -e " + d + "/go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; "
      "else "
      "  [ -z \"${ZRUN_RENDEZVOUS_FD+x}\" ] || exit 11; "
      "  ls -l /proc/$$/fd > " + d + "/fds$ZRUN_RANK; "
      "fi";
  LaunchOptions o;
  o.nproc = 3;
  auto job = std::async(std::launch::async, [&] { return launch_local_workers(sh(script), o); });
  const auto port_file = dir.path / "port";
  for (int i = 0; i < 400 && !std::filesystem::exists(port_file); ++i)
    if (job.wait_for(std::chrono::milliseconds(25)) == std::future_status::ready) break;
  const int port = std::atoi(read_file(port_file).c_str());
  ASSERT_GT(port, 0) << "rank 0 noted no port; the job ended with: " << job.get().message;
  EXPECT_EQ(bind_error(port), EADDRINUSE);  // another process cannot take the port the workers were told
  std::ofstream(dir.path / "go").close();
  const LaunchResult r = job.get();
  EXPECT_EQ(r.exit_code, 0) << r.message;

  const std::string socket0 = read_file(dir.path / "socket0");
  EXPECT_EQ(socket0.rfind("socket:[", 0), 0u) << socket0;
  for (const char* other : {"fds1", "fds2"})
    EXPECT_EQ(read_file(dir.path / other).find(socket0.substr(0, socket0.find(']') + 1)), std::string::npos)
        << other << " holds rank 0's socket";
  EXPECT_EQ(bind_error(port), 0);  // the launcher kept no copy: with its workers gone, the port is free again
}

TEST(LocalLauncher, AWorldOfOneOrAUserChosenRendezvousPortGetsNoSocketHandedDown) {
  const auto no_socket = sh("[ -z \"${ZRUN_RENDEZVOUS_FD+x}\" ]");
  LaunchOptions o;
  o.nproc = 1;
  EXPECT_EQ(launch_local_workers(no_socket, o).exit_code, 0);  // a world of one has no rendezvous
  o.nproc = 2;
  ::setenv("ZRUN_RENDEZVOUS_PORT", "29777", 1);  // the workers meet there: rank 0 binds it, as before
  const LaunchResult r = launch_local_workers(no_socket, o);
  ::unsetenv("ZRUN_RENDEZVOUS_PORT");
  EXPECT_EQ(r.exit_code, 0) << r.message;
  o.master_port = 29778;  // a port of the caller's: rank 0 binds it, as before
  EXPECT_EQ(launch_local_workers(no_socket, o).exit_code, 0);
}

// The worker program of the test below (this test binary, run again by the launcher with ZRUN_* set): meets
// the other workers at the rendezvous, rank 0 on the socket the launcher handed it. Exits kMet when it got
// rank 0's blob.
constexpr int kMet = 42;

int meet_at_the_rendezvous() {
  const std::vector<std::uint8_t> blob = {1, 2, 3, 4, 5};
  try {
    const std::optional<WorkerIdentity> me = detect_worker([](const char* n) { return std::getenv(n); });
    if (!me || (me->rank == 0 && me->rendezvous_fd < 0)) return 3;  // rank 0 must have been handed the socket
    RendezvousOptions rv{me->master_addr, me->master_port, 20};
    rv.listener_fd = me->rendezvous_fd;
    const auto got = rendezvous(me->rank, me->world_size, me->rank == 0 ? blob : std::vector<std::uint8_t>{}, rv);
    return got == blob ? kMet : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker: %s\n", e.what());
    return 2;
  }
}

TEST(LocalLauncherWorker, DISABLED_MeetAtTheRendezvous) { std::_Exit(meet_at_the_rendezvous()); }

TEST(LocalLauncher, WorkersMeetAtARendezvousOnTheSocketTheLauncherHandsRankZero) {
  ::unsetenv("GTEST_OUTPUT");  // the workers are this binary: they must not write over this run's report
  LaunchOptions o;
  o.nproc = 3;
  o.ordinary_exit_codes = {kMet};
  const LaunchResult r = launch_local_workers(
      {"/proc/self/exe", "--gtest_filter=LocalLauncherWorker.DISABLED_MeetAtTheRendezvous",
       "--gtest_also_run_disabled_tests"},
      o);
  EXPECT_EQ(r.exit_code, kMet) << r.message;  // every rank met (a rank that did not would fail or time out)
  EXPECT_EQ(r.failed_rank, -1);
}

}  // namespace
}  // namespace zrun
