// qwZ block-size choice as DeepSpeed's CUDAQuantizer makes it (partition_parameters.py).
#include "kernels/qwz_quant.hpp"

namespace zk {

int64_t qwz_deepspeed_block_elems(int64_t n) {
  constexpr int64_t kTarget = 8000;  // DeepSpeed: "the optimal size is 4k, so we set the target to be below 8k"
  if (n <= 0) return 1;
  int64_t groups = (n + kTarget - 1) / kTarget;
  while (groups < n && n % (8 * groups) != 0) ++groups;
  while (n % (16 * groups) == 0 && n / groups > kTarget) groups *= 2;
  return n / groups;
}

}  // namespace zk
