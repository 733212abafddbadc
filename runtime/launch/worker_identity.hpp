// Who this process is in a zrun job: its rank, the world size, its local rank on the node, and where
// rank 0's rendezvous listens. Read from the environment of whichever launcher started it: zrun's own
// launcher (ZRUN_*), torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), mpirun (Open
// MPI's OMPI_COMM_WORLD_*) or srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID).
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace zrun {

inline constexpr int kDefaultMasterPort = 29500;

struct WorkerIdentity {
  std::string launcher;          // "zrun", "torchrun", "mpirun", "srun"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;            // index of this process among those of its node: its GPU
  int local_world_size = 0;      // processes on this node; 0 = the launcher does not say
  std::string master_addr = "127.0.0.1";  // where rank 0 listens for the rendezvous
  int master_port = kDefaultMasterPort;  // the rendezvous port: ZRUN_RENDEZVOUS_PORT if set, else
                                         // MASTER_PORT (+1 under torchrun, whose agent holds MASTER_PORT)
  int rendezvous_fd = -1;  // rank 0 under zrun's launcher: the socket the launcher already listens on for the
                           // rendezvous (ZRUN_RENDEZVOUS_FD); -1: rank 0 listens on master_port itself
};

// Returns the value of an environment variable, or nullptr (std::getenv in production, a map in tests).
using EnvLookup = std::function<const char*(const char*)>;

// nullopt when none of the launchers' variables are set (zrun then launches the workers itself).
// Throws std::invalid_argument naming the variable when one is malformed or inconsistent, and when a job
// of several processes gives no MASTER_ADDR (srun and mpirun do not set it; the user exports it).
std::optional<WorkerIdentity> detect_worker(const EnvLookup& env);

// The variables zrun's own launcher sets for local worker `local_rank` of `nproc`.
inline constexpr const char* kEnvRank = "ZRUN_RANK";
inline constexpr const char* kEnvWorldSize = "ZRUN_WORLD_SIZE";
inline constexpr const char* kEnvLocalRank = "ZRUN_LOCAL_RANK";
inline constexpr const char* kEnvLocalWorldSize = "ZRUN_LOCAL_WORLD_SIZE";
inline constexpr const char* kEnvMasterAddr = "MASTER_ADDR";
inline constexpr const char* kEnvMasterPort = "MASTER_PORT";
inline constexpr const char* kEnvRendezvousPort = "ZRUN_RENDEZVOUS_PORT";
// Set by zrun's launcher for rank 0 only, when it picked the port: the number of the inherited file
// descriptor of the socket listening on MASTER_PORT.
inline constexpr const char* kEnvRendezvousFd = "ZRUN_RENDEZVOUS_FD";

}  // namespace zrun
