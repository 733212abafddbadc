#include "runtime/exec/cpu_threads.hpp"

#include <algorithm>

namespace zrun {

int cpu_adam_threads(int host_cores, int gpus_per_node) {
  if (host_cores <= 0) return 0;
  return std::max(1, host_cores / std::max(1, gpus_per_node));
}

}  // namespace zrun
