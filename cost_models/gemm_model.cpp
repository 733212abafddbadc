#include "cost_models/gemm_model.hpp"

#include <algorithm>
#include <stdexcept>

namespace zsim {

namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
}  // namespace

double wave_efficiency(std::int64_t m, std::int64_t n, std::int64_t k, const GemmModel& g, std::int64_t batch) {
  if (g.tile_m <= 0 || g.tile_n <= 0 || g.sms <= 0) throw std::invalid_argument("GEMM model: tiles and SMs must be > 0");
  if (m <= 0 || n <= 0) return 1;
  const std::int64_t tiles = ceil_div(m, g.tile_m) * ceil_div(n, g.tile_n) * std::max<std::int64_t>(1, batch);
  std::int64_t splits = 1;
  if (g.split_k_depth > 0 && tiles < g.sms)
    splits = std::clamp<std::int64_t>(g.sms / tiles, 1, std::max<std::int64_t>(1, k / g.split_k_depth));
  const std::int64_t units = tiles * splits;
  return static_cast<double>(units) / static_cast<double>(ceil_div(units, g.sms) * g.sms);
}

double gemm_model_s(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t batch, int bytes_per_element,
                    double peak_tflops, const GemmModel& g) {
  if (!g.present()) throw std::invalid_argument("GEMM model: max_efficiency must be > 0");
  if (!(peak_tflops > 0)) throw std::invalid_argument("GEMM model: peak TFLOPS must be > 0");
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  // A batched call runs batch x tiles tiles in its waves.
  const double flops = 2.0 * m * n * k * batch;
  const double wave = wave_efficiency(m, n, k, g, batch);
  const double flop_s = flops / (peak_tflops * 1e12 * g.max_efficiency * wave);
  double t = g.launch_us * 1e-6 + flop_s;
  if (g.io_GBps > 0) {
    const double io_s =
        static_cast<double>(bytes_per_element) * batch * (double(m) * k + double(k) * n + double(m) * n) / (g.io_GBps * 1e9);
    t += io_s;
    if (g.io_overlap > 0) t -= g.io_overlap * std::min(flop_s, io_s);
  }
  return t;
}

}  // namespace zsim

namespace zsim {

double gemm_call_flops(const GemmShape& g) {
  return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
         static_cast<double>(g.batch);
}

bool gemm_aligned(const GemmShape& g, int bytes_per_element) {
  if (bytes_per_element <= 0 || 16 % bytes_per_element != 0)
    throw std::invalid_argument("GEMM alignment: bytes per element must divide 16");
  const std::int64_t elements = 16 / bytes_per_element;
  return g.m % elements == 0 && g.n % elements == 0 && g.k % elements == 0;
}

double gemm_model_efficiency(const std::vector<GemmShape>& gemms, int bytes_per_element, double peak_tflops,
                             const GemmModel& g) {
  double flops = 0, seconds = 0;
  for (const GemmShape& s : gemms) {
    if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0 || s.calls <= 0) continue;
    if (s.calls == 1) {  // (kept apart: the same arithmetic as before calls existed)
      flops += 2.0 * s.m * s.n * s.k * s.batch;
      seconds += gemm_model_s(s.m, s.n, s.k, s.batch, bytes_per_element, peak_tflops, g);
    } else {
      flops += 2.0 * s.m * s.n * s.k * s.batch * s.calls;
      seconds += gemm_model_s(s.m, s.n, s.k, s.batch, bytes_per_element, peak_tflops, g) * s.calls;
    }
  }
  if (!(seconds > 0)) return 0;
  return flops / (peak_tflops * 1e12 * seconds);
}

}  // namespace zsim
