#include "runtime/launch/local_launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "runtime/launch/rendezvous.hpp"
#include "runtime/launch/worker_identity.hpp"

namespace zrun {
namespace {

// The workers' process groups, for the signal handler: a Ctrl-C or SIGTERM to the launcher reaches every
// worker and whatever it started.
constexpr int kMaxWorkers = 1024;
volatile sig_atomic_t g_worker_count = 0;
pid_t g_workers[kMaxWorkers];

void forward_signal(int sig) {
  for (int i = 0; i < g_worker_count; ++i) ::kill(-g_workers[i], sig);
}

// Where rank 0's rendezvous listens. With a port of the user's, rank 0 binds it itself (listener_fd -1). When
// the launcher picks the port, it already listens on it (listener_fd) and hands that socket to rank 0: a port
// merely found free could be taken by another process (another job's NCCL sockets) before rank 0 binds it.
struct RendezvousPort {
  int port = 0;
  int listener_fd = -1;  // close-on-exec: only rank 0's child clears that, the other workers never keep it
};

RendezvousPort rendezvous_port(const LaunchOptions& o) {
  if (o.master_port > 0) return {o.master_port, -1};
  // Nothing would use a held socket in a world of one (no rendezvous), nor when the user exported
  // ZRUN_RENDEZVOUS_PORT: the workers inherit it, prefer it to MASTER_PORT, and rank 0 binds it as before.
  if (o.nproc == 1 || std::getenv(kEnvRendezvousPort) != nullptr) return {pick_free_local_port(), -1};
  const RendezvousListener l = open_rendezvous_listener();
  return {l.port, l.fd};
}

// Closes the launcher's copy of rank 0's listener (once rank 0 has its own, or when no worker will).
void release_listener(RendezvousPort& rv) {
  if (rv.listener_fd >= 0) ::close(rv.listener_fd);
  rv.listener_fd = -1;
}

// The child: its own process group (so that stopping it stops what it started), the worker's variables,
// then the program. Rank 0 keeps the launcher's listener across exec, and is told its number.
[[noreturn]] void exec_worker(const std::vector<std::string>& argv, int rank, const LaunchOptions& o,
                              const RendezvousPort& rv) {
  ::setpgid(0, 0);
  ::setenv(kEnvRank, std::to_string(rank).c_str(), 1);
  ::setenv(kEnvWorldSize, std::to_string(o.nproc).c_str(), 1);
  ::setenv(kEnvLocalRank, std::to_string(rank).c_str(), 1);
  ::setenv(kEnvLocalWorldSize, std::to_string(o.nproc).c_str(), 1);
  ::setenv(kEnvMasterAddr, o.master_addr.c_str(), 1);
  ::setenv(kEnvMasterPort, std::to_string(rv.port).c_str(), 1);
  ::unsetenv(kEnvRendezvousFd);
  if (rank == 0 && rv.listener_fd >= 0) {
    if (::fcntl(rv.listener_fd, F_SETFD, 0) != 0) {  // survive the exec
      std::fprintf(stderr, "zrun: cannot hand the rendezvous socket to worker 0: %s\n", std::strerror(errno));
      ::_exit(127);
    }
    ::setenv(kEnvRendezvousFd, std::to_string(rv.listener_fd).c_str(), 1);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  std::fprintf(stderr, "zrun: cannot start worker %d (%s): %s\n", rank, args[0], std::strerror(errno));
  ::_exit(127);
}

// Exit code as a shell reports it: the code, or 128 + signal.
int code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string how_it_ended(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
}

// Stops the workers still running: SIGTERM, then SIGKILL after the grace period; reaps them all.
void stop_all(std::map<pid_t, int>& running, double grace_s) {
  for (const auto& [pid, rank] : running) ::kill(-pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (!running.empty() && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) running.erase(pid);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& [pid, rank] : running) ::kill(-pid, SIGKILL);
  for (const auto& [pid, rank] : running) ::waitpid(pid, nullptr, 0);
  running.clear();
}

}  // namespace

LaunchResult launch_local_workers(const std::vector<std::string>& argv, const LaunchOptions& o) {
  if (argv.empty()) throw std::invalid_argument("launch_local_workers: no program");
  if (o.nproc < 1 || o.nproc > kMaxWorkers)
    throw std::invalid_argument("launch_local_workers: --nproc-per-node must be in [1, 1024]");
  RendezvousPort rv = rendezvous_port(o);
  std::map<pid_t, int> running;  // pid -> rank
  for (int rank = 0; rank < o.nproc; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::strerror(errno);
      release_listener(rv);
      stop_all(running, 0);
      throw std::runtime_error("zrun: cannot start worker " + std::to_string(rank) + ": fork: " + why);
    }
    if (pid == 0) exec_worker(argv, rank, o, rv);
    if (rank == 0) release_listener(rv);  // rank 0 holds the port now; the other workers never see the socket
    ::setpgid(pid, pid);  // also here: no race with a signal before the child ran setpgid
    running[pid] = rank;
    g_workers[g_worker_count] = pid;
    g_worker_count = g_worker_count + 1;
  }
  struct sigaction forward{}, old_int{}, old_term{};
  forward.sa_handler = forward_signal;
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);
  struct Restore {  // the launcher's own handlers come back however this function returns
    struct sigaction i, t;
    ~Restore() {
      ::sigaction(SIGINT, &i, nullptr);
      ::sigaction(SIGTERM, &t, nullptr);
      g_worker_count = 0;
    }
  } restore{old_int, old_term};
  LaunchResult result;
  std::set<int> ordinary_codes;
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const int rank = it->second;
    running.erase(it);
    const int code = code_of(status);
    if (code == 0 || (WIFEXITED(status) && o.ordinary_exit_codes.count(code))) {
      if (code != 0) ordinary_codes.insert(code);
      continue;
    }
    result.exit_code = code;
    result.failed_rank = rank;
    result.message = fmt::format("zrun: worker rank {} {}; stopping the other {} worker(s)", rank,
                                 how_it_ended(status), running.size());
    stop_all(running, o.kill_grace_s);
    return result;
  }
  if (!ordinary_codes.empty()) result.exit_code = *ordinary_codes.begin();
  return result;
}

}  // namespace zrun
