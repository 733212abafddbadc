// One rank's training run under zrun: the model, the arenas, the executor; the warm-up and measured steps with
// the loss of every step; then (rank 0) a report laid out like zsim's with measured figures beside zsim's
// predictions, and the --json / --trace / --csv files.
#pragma once
#include "runtime/cli/job_setup.hpp"
#include "runtime/cli/zrun_args.hpp"
#include "runtime/comm/communicators.hpp"
#include "runtime/comm/fault_injection.hpp"
#include "runtime/comm/watchdog.hpp"

namespace zrun {

// Returns the process exit code (0 when every step ran).
int train(const ZrunArgs& args, const Job& job, int rank, Communicators& comms, Watchdog& dog,
          const FaultInjector& faults);

}  // namespace zrun
