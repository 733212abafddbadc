// Compute-kernel cost models: GEMM-bound work as FLOPs over achieved peak, memory-bound kernels
// (quantize, dequantize, GPU Adam) as bytes over achieved HBM bandwidth, CPU Adam as parameters over
// the host's achieved update throughput.
#pragma once
#include "sim/common/units.hpp"

namespace zsim {

// flops / (peak_tflops * 1e12 * efficiency).
Seconds gemm_s(Flops flops, double peak_tflops, double efficiency);

// hbm_bytes / (hbm_GBps * 1e9 * efficiency): read + write traffic of a memory-bound kernel.
Seconds memory_bound_s(Bytes hbm_bytes, double hbm_GBps, double efficiency);

// A kernel bound by whichever is slower, its FLOPs or its memory traffic (roofline).
Seconds roofline_s(Flops flops, double peak_tflops, double gemm_efficiency, Bytes hbm_bytes, double hbm_GBps,
                   double hbm_efficiency);

// params / (cores * params_per_s_per_core): DeepSpeed CPU Adam (vectorised, one thread per core).
Seconds cpu_adam_s(Elements params, double cores, double params_per_s_per_core);

}  // namespace zsim
