#include "kernels/cpu/half_to_fp32.hpp"

#include "kernels/half_convert.hpp"

namespace zk {

void half16_to_fp32(const uint16_t* from, float* to, int64_t n, Half16 fmt, bool add) {
  const bool bf16 = fmt == Half16::bf16;
  // Small copies stay on the calling thread (a parallel region costs more than they do).
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) {
    const float v = bf16 ? bf16_to_float(from[i]) : fp16_to_float(from[i]);
    to[i] = add ? to[i] + v : v;
  }
}

}  // namespace zk
