#include "runtime/launch/worker_identity.hpp"

#include <charconv>
#include <stdexcept>
#include <string>

namespace zrun {
namespace {

// Reads an integer variable; nullopt when unset; throws naming the variable when not an integer.
std::optional<int> int_var(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr) return std::nullopt;
  const std::string s(v);
  int out = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    throw std::invalid_argument("environment variable " + std::string(name) + "='" + s + "' is not an integer");
  return out;
}

int required_int(const EnvLookup& env, const char* name, const char* launcher) {
  const auto v = int_var(env, name);
  if (!v) throw std::invalid_argument(std::string(launcher) + " environment: " + name + " is not set");
  return *v;
}

struct Names {
  const char* launcher;
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_world;  // may be unset
};

// The first launcher whose rank variable is set. Order matters: torchrun and mpirun jobs may run inside
// a Slurm allocation, whose SLURM_PROCID they inherit, so Slurm comes last.
constexpr Names kLaunchers[] = {
    {"zrun", kEnvRank, kEnvWorldSize, kEnvLocalRank, kEnvLocalWorldSize},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

// The listening socket zrun's launcher handed to its rank 0 (ZRUN_RENDEZVOUS_FD), or -1. Only zrun's own
// launcher sets it, and only for rank 0; anywhere else (a stale variable in a torchrun or srun job) it is
// ignored and rank 0 listens on master_port as before.
int rendezvous_fd(const EnvLookup& env, const WorkerIdentity& w) {
  if (w.launcher != "zrun" || w.rank != 0) return -1;
  const std::optional<int> fd = int_var(env, kEnvRendezvousFd);
  if (!fd) return -1;
  if (*fd < 0)
    throw std::invalid_argument("environment variable " + std::string(kEnvRendezvousFd) + "=" +
                                std::to_string(*fd) + " is not a file descriptor");
  return *fd;
}

}  // namespace

std::optional<WorkerIdentity> detect_worker(const EnvLookup& env) {
  for (const Names& n : kLaunchers) {
    if (env(n.rank) == nullptr) continue;
    WorkerIdentity w;
    w.launcher = n.launcher;
    w.rank = required_int(env, n.rank, n.launcher);
    w.world_size = required_int(env, n.world, n.launcher);
    w.local_rank = required_int(env, n.local_rank, n.launcher);
    w.local_world_size = int_var(env, n.local_world).value_or(0);
    if (w.world_size < 1)
      throw std::invalid_argument(std::string(n.launcher) + " environment: " + n.world + " must be >= 1");
    if (w.rank < 0 || w.rank >= w.world_size)
      throw std::invalid_argument(std::string(n.launcher) + " environment: " + n.rank + "=" + std::to_string(w.rank) +
                                  " is outside [0, " + std::to_string(w.world_size) + ")");
    if (w.local_rank < 0 || w.local_rank > w.rank)
      throw std::invalid_argument(std::string(n.launcher) + " environment: " + n.local_rank + "=" +
                                  std::to_string(w.local_rank) + " is outside [0, rank]");
    if (const char* addr = env(kEnvMasterAddr); addr != nullptr && *addr != '\0') {
      w.master_addr = addr;
    } else if (w.world_size > 1) {
      throw std::invalid_argument(std::string(n.launcher) +
                                  " job of several processes: MASTER_ADDR is not set (export the host name of "
                                  "rank 0, e.g. MASTER_ADDR=$(scontrol show hostnames | head -n1))");
    }
    // torchrun's agent already listens on MASTER_PORT (its TCPStore): zrun's rendezvous takes the next port.
    const int master_port = int_var(env, kEnvMasterPort).value_or(kDefaultMasterPort);
    w.master_port = int_var(env, kEnvRendezvousPort).value_or(w.launcher == "torchrun" ? master_port + 1 : master_port);
    if (w.master_port < 1 || w.master_port > 65535)
      throw std::invalid_argument("rendezvous port " + std::to_string(w.master_port) +
                                  " (from MASTER_PORT or ZRUN_RENDEZVOUS_PORT) is not a TCP port");
    w.rendezvous_fd = rendezvous_fd(env, w);
    return w;
  }
  return std::nullopt;
}

}  // namespace zrun
