#include "runtime/comm/watchdog.hpp"

#include <unistd.h>

#include <cstdio>
#include <future>

#include <fmt/format.h>

namespace zrun {

Watchdog::Watchdog(int rank, double op_timeout_s, double poll_interval_s, WatchdogHooks hooks)
    : rank_(rank), timeout_(op_timeout_s), interval_(poll_interval_s), hooks_(std::move(hooks)) {
  if (!hooks_.die)
    hooks_.die = [](const std::string&) { ::_exit(kExitWatchdog); };  // fire() printed the message
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::uint64_t Watchdog::begin(const std::string& op, const std::string& group) {
  std::lock_guard lock(mu_);
  const std::uint64_t token = next_token_++;
  in_flight_[token] = {op, group, std::chrono::steady_clock::now()};
  return token;
}

void Watchdog::end(std::uint64_t token) {
  std::lock_guard lock(mu_);
  in_flight_.erase(token);
}

bool Watchdog::fired() const {
  std::lock_guard lock(mu_);
  return fired_;
}

void Watchdog::loop() {
  std::unique_lock lock(mu_);
  while (!stop_ && !fired_) {
    cv_.wait_for(lock, interval_);
    if (stop_) break;
    // The oldest op in flight names what the rank was doing.
    const InFlight* oldest = nullptr;
    for (const auto& [token, f] : in_flight_)
      if (!oldest || f.start < oldest->start) oldest = &f;
    const std::string doing = oldest ? fmt::format("op '{}' on group '{}'", oldest->op, oldest->group)
                                     : std::string("no op in flight");
    lock.unlock();
    const std::optional<std::string> error = hooks_.poll_error ? hooks_.poll_error() : std::nullopt;
    lock.lock();
    if (error) {
      fire(fmt::format("zrun: rank {}: communicator error ({}) during {}; aborting the communicators", rank_, *error,
                       doing));
      break;
    }
    if (oldest) {
      const auto elapsed = std::chrono::steady_clock::now() - oldest->start;
      if (elapsed > timeout_) {
        fire(fmt::format("zrun: rank {}: {} did not finish within the op timeout of {:.0f} s; aborting the "
                         "communicators",
                         rank_, doing, timeout_.count()));
        break;
      }
    }
  }
}

// Called with mu_ held. The abort runs on its own thread with a bound: ncclCommAbort must not keep a
// hung job alive.
void Watchdog::fire(const std::string& message) {
  fired_ = true;
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  if (hooks_.abort) {
    auto aborted = std::async(std::launch::async, hooks_.abort);
    aborted.wait_for(std::chrono::seconds(10));
    // A blocked abort is left behind: die() ends the process.
    if (aborted.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      std::fprintf(stderr, "zrun: rank %d: the abort did not return within 10 s\n", rank_);
      hooks_.die(message);
      new auto(std::move(aborted));  // never joined: die() ended the process in production
      return;
    }
  }
  hooks_.die(message);
}

}  // namespace zrun
