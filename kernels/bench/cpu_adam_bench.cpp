// CPU Adam throughput: parameters per second of zk::cpu_adam_step (best SIMD level, all OpenMP
// threads) over n fp32 parameters. Usage: cpu_adam_bench [n] [reps]. Prints one "params_per_s" line.
#include <omp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kernels/cpu/cpu_adam.hpp"

int main(int argc, char** argv) {
  using namespace zk;
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : int64_t{1} << 25;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
  std::vector<float> p(n), m(n, 0.0f), v(n, 0.0f), g(n);
  std::vector<uint16_t> w(n);
  uint64_t s = 42;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = static_cast<float>(static_cast<int32_t>(s >> 32)) * 4.6e-10f;
    g[i] = static_cast<float>(static_cast<int32_t>(s >> 16)) * 4.6e-10f;
  }
  AdamHyper h; h.lr = 1e-3f; h.weight_decay = 0.01f; h.adamw = false;  // torch.optim.Adam semantics
  const SimdLevel level = best_simd_level();
  std::vector<double> t;
  for (int r = 0; r < reps + 2; ++r) {
    h.step = r + 1;
    const auto a = std::chrono::steady_clock::now();
    cpu_adam_step(p.data(), m.data(), v.data(), g.data(), w.data(), Half16::bf16, n, h, level);
    const auto b = std::chrono::steady_clock::now();
    if (r >= 2) t.push_back(std::chrono::duration<double>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  const double sec = t[t.size() / 2];
  std::printf("zk cpu_adam: n=%lld simd=%s threads=%d median %.3f ms params_per_s %.4g\n", static_cast<long long>(n),
              to_string(level).c_str(), omp_get_max_threads(), sec * 1e3, n / sec);
  return 0;
}
