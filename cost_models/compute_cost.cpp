#include "cost_models/compute_cost.hpp"

#include <algorithm>
#include <stdexcept>

#include "cost_models/measured_curve.hpp"

namespace zsim {

namespace {
double rate(double value, double efficiency, const char* what) {
  const double r = value * efficiency;
  if (!(r > 0)) throw std::invalid_argument(std::string("non-positive achieved ") + what);
  return r;
}
}  // namespace

Seconds gemm_s(Flops flops, double peak_tflops, double efficiency) {
  if (flops <= 0) return 0;
  return flops / (rate(peak_tflops, efficiency, "TFLOPS") * 1e12);
}

Seconds memory_bound_s(Bytes hbm_bytes, double hbm_GBps, double efficiency) {
  if (hbm_bytes <= 0) return 0;
  return static_cast<double>(hbm_bytes) / GBps_to_bytes_per_s(rate(hbm_GBps, efficiency, "HBM bandwidth"));
}

Seconds roofline_s(Flops flops, double peak_tflops, double gemm_efficiency, Bytes hbm_bytes, double hbm_GBps,
                   double hbm_efficiency) {
  return std::max(gemm_s(flops, peak_tflops, gemm_efficiency), memory_bound_s(hbm_bytes, hbm_GBps, hbm_efficiency));
}

double cpu_adam_params_per_s(double cores, double params_per_s_per_core, double node_params_per_s, int ranks_per_node) {
  const double own = rate(cores, params_per_s_per_core, "CPU Adam throughput");
  if (!(node_params_per_s >= 0)) throw std::invalid_argument("negative CPU Adam node ceiling");
  if (ranks_per_node < 1) throw std::invalid_argument("CPU Adam: ranks per node must be >= 1");
  return node_params_per_s > 0 ? std::min(own, node_params_per_s / ranks_per_node) : own;
}

double cpu_adam_measured_params_per_s(const std::vector<std::pair<double, double>>& threads_rate, double cores) {
  if (!(cores > 0)) throw std::invalid_argument("CPU Adam: a rank needs cores > 0");
  const double r = log_log_interpolated(threads_rate, cores, "CPU Adam's measured rates");
  const double fewest = threads_rate.front().first;
  return cores < fewest ? r * cores / fewest : r;
}

Seconds cpu_adam_s(Elements params, double cores, double params_per_s_per_core, double node_params_per_s,
                   int ranks_per_node) {
  if (params <= 0) return 0;
  return static_cast<double>(params) / cpu_adam_params_per_s(cores, params_per_s_per_core, node_params_per_s,
                                                             ranks_per_node);
}

}  // namespace zsim
