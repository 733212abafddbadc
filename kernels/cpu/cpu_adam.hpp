// CPU Adam/AdamW for ZeRO-Offload: fp32 params and moments in host memory, fp32 gradient in, 16-bit
// weights written to a (possibly pinned) host buffer; OpenMP threads, SIMD picked at run time.
#pragma once
#include <cstdint>
#include <string>
#include "kernels/adam_hyper.hpp"
#include "kernels/kernel_types.hpp"

namespace zk {

enum class SimdLevel { scalar, avx2, avx512 };

std::string to_string(SimdLevel level);
// Widest level this CPU supports (__builtin_cpu_supports).
SimdLevel best_simd_level();
bool simd_level_supported(SimdLevel level);

// One step over n parameters. weights16 may be nullptr. level must be supported (else std::invalid_argument).
// threads: the OpenMP threads of the step's parallel region (num_threads); 0 = OpenMP's default (OMP_NUM_THREADS,
// else every hardware thread); negative: std::invalid_argument.
void cpu_adam_step(float* params, float* exp_avg, float* exp_avg_sq, const float* grads, uint16_t* weights16,
                   Half16 weights_fmt, int64_t n, const AdamHyper& h, SimdLevel level, int threads = 0);
inline void cpu_adam_step(float* params, float* exp_avg, float* exp_avg_sq, const float* grads, uint16_t* weights16,
                          Half16 weights_fmt, int64_t n, const AdamHyper& h) {
  cpu_adam_step(params, exp_avg, exp_avg_sq, grads, weights16, weights_fmt, n, h, best_simd_level());
}

// The threads cpu_adam_step runs on when asked for `threads` (0: OpenMP's default, omp_get_max_threads()).
int cpu_adam_thread_count(int threads);

}  // namespace zk
