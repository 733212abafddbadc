// Compute-kernel cost models: GEMM-bound work as FLOPs over achieved peak, memory-bound kernels
// (quantize, dequantize, GPU Adam) as bytes over achieved HBM bandwidth, CPU Adam as parameters over
// the host's achieved update throughput.
#pragma once
#include <utility>
#include <vector>

#include "sim/common/units.hpp"

namespace zsim {

// flops / (peak_tflops * 1e12 * efficiency).
Seconds gemm_s(Flops flops, double peak_tflops, double efficiency);

// hbm_bytes / (hbm_GBps * 1e9 * efficiency): read + write traffic of a memory-bound kernel.
Seconds memory_bound_s(Bytes hbm_bytes, double hbm_GBps, double efficiency);

// A kernel bound by whichever is slower, its FLOPs or its memory traffic (roofline).
Seconds roofline_s(Flops flops, double peak_tflops, double gemm_efficiency, Bytes hbm_bytes, double hbm_GBps,
                   double hbm_efficiency);

// A rank's CPU Adam rate, params/s: min(cores x params_per_s_per_core, node_params_per_s / ranks_per_node). CPU Adam is
// memory-bandwidth bound: each core adds its rate until the node's memory bandwidth (node_params_per_s, the
// ceiling of all cores together) is spent, and in a data-parallel step every rank of the node runs its CPU Adam at
// the same time, each with its share of the ceiling. node_params_per_s 0 = no ceiling (cores x per core). Throws
// std::invalid_argument on a non-positive rate, a negative ceiling or ranks_per_node < 1.
double cpu_adam_params_per_s(double cores, double params_per_s_per_core, double node_params_per_s = 0,
                             int ranks_per_node = 1);

// A rank's CPU Adam rate, params/s, from calibrate's measured rates of its node's rank count ((threads, params/s per
// rank), ascending threads; efficiency.cpu_adam_measured): interpolated at `cores` in log threads and log rate, the most
// threads' rate beyond them, and below the fewest threads that rate scaled by cores / threads. Throws
// std::invalid_argument on no points, a point that is not positive or cores <= 0.
double cpu_adam_measured_params_per_s(const std::vector<std::pair<double, double>>& threads_rate, double cores);

// params / cpu_adam_params_per_s(...): DeepSpeed CPU Adam (vectorised, one thread per core).
Seconds cpu_adam_s(Elements params, double cores, double params_per_s_per_core, double node_params_per_s = 0,
                   int ranks_per_node = 1);

}  // namespace zsim
