#include "runtime/calibrate/gpu_timing.hpp"

#include <algorithm>
#include <vector>

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

double time_gpu(const std::function<void()>& call, cudaStream_t s, int max_reps) {
  Events e;
  for (int i = 0; i < 2; ++i) call();
  ZRUN_CUDA_CHECK(cudaStreamSynchronize(s));
  ZRUN_CUDA_CHECK(cudaEventRecord(e.a, s));
  call();
  ZRUN_CUDA_CHECK(cudaEventRecord(e.b, s));
  ZRUN_CUDA_CHECK(cudaEventSynchronize(e.b));
  float ms = 0;
  ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, e.a, e.b));
  const int reps = std::clamp(static_cast<int>(2.0 / std::max(ms, 1e-4f)), 3, max_reps);
  std::vector<double> trials;
  for (int t = 0; t < 5; ++t) {
    ZRUN_CUDA_CHECK(cudaEventRecord(e.a, s));
    for (int r = 0; r < reps; ++r) call();
    ZRUN_CUDA_CHECK(cudaEventRecord(e.b, s));
    ZRUN_CUDA_CHECK(cudaEventSynchronize(e.b));
    ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, e.a, e.b));
    trials.push_back(ms * 1e-3 / reps);
  }
  ZRUN_CUDA_CHECK(cudaGetLastError());
  return median(trials);
}

}  // namespace zrun::calibrate
