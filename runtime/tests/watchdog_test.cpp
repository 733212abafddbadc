// The watchdog with fake communicators: it ends the rank on an overdue op or an async error, naming
// rank, op and group, and leaves a healthy rank alone.
#include "runtime/comm/watchdog.hpp"

#include <atomic>
#include <functional>
#include <chrono>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace zrun {
namespace {

using namespace std::chrono_literals;

struct FakeComms {
  std::atomic<bool> error{false};
  std::atomic<bool> aborted{false};
  std::mutex mu;
  std::string died_with;
  WatchdogHooks hooks() {
    WatchdogHooks h;
    h.poll_error = [this]() -> std::optional<std::string> {
      if (error) return std::string("remote process exited");
      return std::nullopt;
    };
    h.abort = [this] { aborted = true; };
    h.die = [this](const std::string& m) {
      std::lock_guard lock(mu);
      died_with = m;
    };
    return h;
  }
  std::string message() {
    std::lock_guard lock(mu);
    return died_with;
  }
};

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

TEST(Watchdog, AnOpPastTheTimeoutAbortsAndEndsTheRankNamingRankOpAndGroup) {
  FakeComms comms;
  Watchdog dog(2, /*op_timeout_s=*/0.3, /*poll_interval_s=*/0.02, comms.hooks());
  dog.begin("fwd.L3.all_gather", "hpz");
  ASSERT_TRUE(wait_until([&] { return dog.fired(); }, 5000ms));
  EXPECT_TRUE(comms.aborted);
  const std::string m = comms.message();
  EXPECT_NE(m.find("rank 2"), std::string::npos) << m;
  EXPECT_NE(m.find("op 'fwd.L3.all_gather' on group 'hpz'"), std::string::npos) << m;
  EXPECT_NE(m.find("timeout"), std::string::npos) << m;
}

TEST(Watchdog, AnAsyncErrorAbortsAndEndsTheRankNamingTheOpInFlight) {
  FakeComms comms;
  Watchdog dog(0, 100, 0.02, comms.hooks());
  dog.begin("bwd.L0.reduce_scatter", "world");
  comms.error = true;
  ASSERT_TRUE(wait_until([&] { return dog.fired(); }, 5000ms));
  EXPECT_TRUE(comms.aborted);
  EXPECT_NE(comms.message().find("remote process exited"), std::string::npos) << comms.message();
  EXPECT_NE(comms.message().find("op 'bwd.L0.reduce_scatter' on group 'world'"), std::string::npos);
}

TEST(Watchdog, OpsThatFinishWithinTheTimeoutLeaveTheRankAlone) {
  FakeComms comms;
  {
    Watchdog dog(0, 0.5, 0.02, comms.hooks());
    for (int i = 0; i < 10; ++i) {
      const auto t = dog.begin("op", "world");
      std::this_thread::sleep_for(50ms);  // 0.5 s in all, each op well within its timeout
      dog.end(t);
    }
    std::this_thread::sleep_for(200ms);
    EXPECT_FALSE(dog.fired());
  }
  EXPECT_FALSE(comms.aborted);
  EXPECT_EQ(comms.message(), "");
}

TEST(Watchdog, TheDefaultDeathExitsWithTheWatchdogCodeAndPrintsTheMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog dog(1, 0.1, 0.02, WatchdogHooks{});
        dog.begin("init.comm_check.world", "world");
        std::this_thread::sleep_for(10s);
      },
      ::testing::ExitedWithCode(kExitWatchdog), "rank 1: op 'init.comm_check.world' on group 'world' did not finish");
}

}  // namespace
}  // namespace zrun
