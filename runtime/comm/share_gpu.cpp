#include "runtime/comm/share_gpu.hpp"

#include <cstdlib>

#include <fmt/format.h>

namespace zrun {

void share_gpu_environment(int rank) {
  ::setenv("NCCL_HOSTID", fmt::format("zrun-share-gpu-rank{}", rank).c_str(), 1);
  ::setenv("NCCL_NET", "Socket", 0);
  ::setenv("NCCL_IB_DISABLE", "1", 0);
  ::setenv("NCCL_SOCKET_IFNAME", "lo", 0);
}

}  // namespace zrun
