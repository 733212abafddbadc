// CPU Adam on every rank of the host at once, as a data-parallel step runs its optimizer: each rank's partition on
// t threads, each step started together (a barrier on the world communicator), the step's time its slowest rank's.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ostream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kernels/cpu/cpu_adam.hpp"
#include "runtime/calibrate/benches.hpp"
#include "runtime/calibrate/fit.hpp"
#include "runtime/comm/check.hpp"

namespace zrun::calibrate {

void measure_cpu_adam_together(Measurements& m, ncclComm_t world, int ranks, int rank, bool quick, std::ostream& log) {
  if (ranks < 2) return;
  const std::int64_t n = quick ? (4ll << 20) : (128ll << 20);  // per rank, as measure_cpu_adam's one
  std::vector<float> p(n, 0.1f), a(n, 0.0f), v(n, 0.0f), g(n, 0.01f);
  std::vector<std::uint16_t> w(n);
  zk::AdamHyper h;
  const zk::SimdLevel level = zk::best_simd_level();
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cudaStream_t s;
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  constexpr int kMaxReps = 5;
  float* d = nullptr;
  ZRUN_CUDA_CHECK(cudaMalloc(&d, kMaxReps * sizeof(float)));
  auto barrier = [&] {
    ZRUN_NCCL_CHECK(ncclAllReduce(d, d, 1, ncclFloat32, ncclSum, world, s));
    ZRUN_CUDA_CHECK(cudaStreamSynchronize(s));
  };
  if (rank == 0) log << fmt::format("zrun calibrate: CPU Adam on {} ranks at once\n", ranks);
  for (const int threads : cpu_adam_thread_counts(std::max(1, hardware / ranks))) {
    // The same count of steps on every rank: 3 on the fewest threads (the slowest steps), 5 above; one warms first.
    const int reps = threads < 4 ? 3 : kMaxReps;
    std::vector<float> steps;
    for (int i = 0; i <= reps; ++i) {
      barrier();
      h.step = i + 1;
      const auto t0 = std::chrono::steady_clock::now();
      zk::cpu_adam_step(p.data(), a.data(), v.data(), g.data(), w.data(), zk::Half16::bf16, n, h, level, threads);
      if (i > 0) steps.push_back(std::chrono::duration<float>(std::chrono::steady_clock::now() - t0).count());
    }
    // Each step's slowest rank.
    ZRUN_CUDA_CHECK(cudaMemcpyAsync(d, steps.data(), reps * sizeof(float), cudaMemcpyHostToDevice, s));
    ZRUN_NCCL_CHECK(ncclAllReduce(d, d, reps, ncclFloat32, ncclMax, world, s));
    ZRUN_CUDA_CHECK(cudaMemcpyAsync(steps.data(), d, reps * sizeof(float), cudaMemcpyDeviceToHost, s));
    ZRUN_CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<double> slowest(steps.begin(), steps.end());
    const double med = median(slowest);
    if (rank != 0) continue;
    m.cpu_adam.push_back({threads, static_cast<double>(n), med, ranks});
    log << fmt::format("  CPU Adam ({}), {} ranks at once: {} params each in {:.2f} ms (the slowest rank, median of {}) "
                       "on {} threads each: {:.3g} params/s per rank, {:.3g} all together\n",
                       zk::to_string(level), ranks, n, med * 1e3, reps, threads, n / med, ranks * n / med);
  }
  ZRUN_CUDA_CHECK(cudaFree(d));
  ZRUN_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace zrun::calibrate
