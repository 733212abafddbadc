// The OpenMP threads a rank's CPU Adam runs on: the scenario's cores per rank, as zsim prices it
// (sim/engine/op_work.cpp: cluster.host.cores / gpus_per_node cores per rank). Host code, tested in CI.
#pragma once

namespace zrun {

// max(1, host_cores / gpus_per_node) (integer division); 0 when host_cores is 0 or less (the scenario says nothing:
// OpenMP's default, every hardware thread). gpus_per_node below 1 counts as 1.
int cpu_adam_threads(int host_cores, int gpus_per_node);

}  // namespace zrun
