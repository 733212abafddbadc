// From the command line to the job every rank runs, before any GPU work: the scenario (with --here and
// --gpus-per-node applied), the check that its cluster is what was launched, the schedule (planned by
// zsim's library, or read from --schedule) and zsim's verdict on whether it fits. Host code only: the
// checks are tested in CI without a GPU. Every refusal is an InputError (the CLI exits 2).
#pragma once
#include <optional>
#include <string>

#include "runtime/cli/zrun_args.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun {

// What was launched: the world size and, when known, the processes per node.
struct LaunchShape {
  int world_size = 1;
  int local_world_size = 0;  // 0 = not known (the launcher does not say)
  std::string how;           // for messages: "--nproc-per-node 2", "torchrun (WORLD_SIZE=16)"
};

// This machine's GPU, for --here.
struct LocalGpu {
  std::string name;
  zsim::Bytes hbm_bytes = 0;
};

struct Job {
  zsim::Scenario scenario;
  zsim::Schedule schedule;
  bool fits = true;
  std::string fit_summary;  // "gpu peak 12.3 GiB <= capacity 80 GiB" or the tier that overflows
  std::string nvme_dir;     // NVMe offload: the swap files' directory (--nvme-dir, else the scenario's nvme_path)
};

// Loads the scenario with --set, then applies --here (one node of this machine's GPUs, or
// world / local_world_size nodes; the GPU's memory becomes `here_gpu`'s) and --gpus-per-node K (world / K
// nodes of K GPUs). Throws InputError when the cluster's nodes x gpus_per_node is not the launched world.
zsim::Scenario load_job_scenario(const ZrunArgs& args, const LaunchShape& launched,
                                 const std::optional<LocalGpu>& here_gpu);

// Plans and builds the schedule (or reads --schedule, which must be for the same world) and asks zsim
// whether it fits. Throws InputError when it does not fit and --force is not given, naming the tier, the
// predicted peak and the capacity; when the scenario asks for what zrun does not run yet (offload_param on NVMe,
// hpZ with offload_param: issue 14), naming the key; and, with NVMe offload, when the directory is missing, not
// writable or has no room for the swap files of the node's ranks.
Job plan_job(const ZrunArgs& args, zsim::Scenario scenario);

}  // namespace zrun
