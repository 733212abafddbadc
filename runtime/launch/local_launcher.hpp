// zrun's own launcher for one node: starts one worker process per local GPU (the same command, with
// ZRUN_RANK / ZRUN_WORLD_SIZE / ZRUN_LOCAL_RANK / ZRUN_LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT set),
// waits for all, and when one fails stops the others, so that no job is left hanging. When it picks the
// rendezvous port itself, it listens on it before starting any worker and hands that socket to rank 0
// (ZRUN_RENDEZVOUS_FD), so that no other process can take the port in between.
#pragma once
#include <set>
#include <string>
#include <vector>

namespace zrun {

struct LaunchOptions {
  int nproc = 1;                      // workers (= local GPUs)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;                // 0: a free port, held by the launcher until rank 0 takes it over
  std::set<int> ordinary_exit_codes;  // worker exit codes that are not failures (besides 0)
  double kill_grace_s = 5;            // SIGTERM, then SIGKILL after this long
};

struct LaunchResult {
  int exit_code = 0;      // 0; the common ordinary code; or the first failing worker's (128 + signal if killed)
  int failed_rank = -1;   // the first worker that failed, -1 if none
  std::string message;    // names the failing rank and how it ended; empty when none failed
};

// `argv[0]` is the program (a path); the workers inherit stdout/stderr. Throws std::runtime_error if a
// worker cannot be started.
LaunchResult launch_local_workers(const std::vector<std::string>& argv, const LaunchOptions& options);

}  // namespace zrun
