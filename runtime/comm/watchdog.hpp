// The watchdog of one rank: a thread that watches the ops in flight and the communicators. When an op
// runs longer than the timeout, or a communicator reports an asynchronous error, it prints which rank,
// op and group, aborts the communicators and ends the process, so a fault never leaves a job hanging.
// What "poll", "abort" and "die" mean is given as hooks: NCCL in production (communicators.hpp), fakes in
// the host tests.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace zrun {

inline constexpr int kExitWatchdog = 5;

struct WatchdogHooks {
  std::function<std::optional<std::string>()> poll_error;  // an async error's description, if any
  std::function<void()> abort;                             // abort every communicator (may block: bounded)
  std::function<void(const std::string&)> die;             // default: _exit(kExitWatchdog) (the message is printed first)
};

class Watchdog {
 public:
  Watchdog(int rank, double op_timeout_s, double poll_interval_s, WatchdogHooks hooks);
  ~Watchdog();  // stops the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Marks an op in flight (several may be, one per stream); returns the token that end() takes.
  std::uint64_t begin(const std::string& op, const std::string& group);
  void end(std::uint64_t token);

  bool fired() const;  // the watchdog has ended (or, with a test's die hook, would have ended) the process

 private:
  struct InFlight {
    std::string op, group;
    std::chrono::steady_clock::time_point start;
  };
  void loop();
  void fire(const std::string& message);

  const int rank_;
  const std::chrono::duration<double> timeout_, interval_;
  WatchdogHooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::uint64_t, InFlight> in_flight_;
  std::uint64_t next_token_ = 1;
  bool stop_ = false, fired_ = false;
  std::thread thread_;
};

}  // namespace zrun
