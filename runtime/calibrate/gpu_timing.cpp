#include "runtime/calibrate/gpu_timing.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "runtime/calibrate/fit.hpp"
#include "runtime/comm/check.hpp"

namespace zrun::calibrate {

namespace {

struct Events {
  cudaEvent_t a = nullptr, b = nullptr;
  Events() {
    ZRUN_CUDA_CHECK(cudaEventCreate(&a));
    ZRUN_CUDA_CHECK(cudaEventCreate(&b));
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

}  // namespace

CallTime time_call(const std::function<void()>& call, cudaStream_t s, int max_reps) {
  Events e;
  for (int i = 0; i < 2; ++i) call();
  ZRUN_CUDA_CHECK(cudaStreamSynchronize(s));
  ZRUN_CUDA_CHECK(cudaEventRecord(e.a, s));
  call();
  ZRUN_CUDA_CHECK(cudaEventRecord(e.b, s));
  ZRUN_CUDA_CHECK(cudaEventSynchronize(e.b));
  float ms = 0;
  ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, e.a, e.b));
  const int reps = std::clamp(static_cast<int>(2.0 / std::max(ms, 1e-4f)), 3, std::min(max_reps, 1000));
  std::vector<double> gpu, host;
  for (int t = 0; t < 5; ++t) {
    ZRUN_CUDA_CHECK(cudaEventRecord(e.a, s));
    const auto h0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) call();
    host.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count() / reps);
    ZRUN_CUDA_CHECK(cudaEventRecord(e.b, s));
    ZRUN_CUDA_CHECK(cudaEventSynchronize(e.b));
    ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, e.a, e.b));
    gpu.push_back(ms * 1e-3 / reps);
  }
  ZRUN_CUDA_CHECK(cudaGetLastError());
  return {median(gpu), median(host)};  // of 5 trials: the middle one
}

}  // namespace zrun::calibrate
