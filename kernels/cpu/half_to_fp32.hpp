// 16-bit (bf16 / fp16) to fp32 on the CPU, written or added into the fp32 array: ZeRO-Offload's gradients arrive in
// pinned host memory in the training dtype and accumulate in the CPU optimizer's fp32 gradients. OpenMP threads.
#pragma once
#include <cstdint>
#include "kernels/kernel_types.hpp"

namespace zk {

// to[i] = (add ? to[i] : 0) + float(from[i]) for i < n.
void half16_to_fp32(const uint16_t* from, float* to, int64_t n, Half16 fmt, bool add);

}  // namespace zk
