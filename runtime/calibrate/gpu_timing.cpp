#include "runtime/calibrate/gpu_timing.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "runtime/calibrate/calibrate_kernels.hpp"
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

// A device buffer of twice the L2's bytes that a cold call's scrub writes (allocated once, kept for the process).
struct Scrub {
  void* p = nullptr;
  std::size_t bytes = 0;
  Scrub() {
    int device = 0, l2 = 0;
    ZRUN_CUDA_CHECK(cudaGetDevice(&device));
    ZRUN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    bytes = 2 * static_cast<std::size_t>(std::max(l2, 1 << 20));
    ZRUN_CUDA_CHECK(cudaMalloc(&p, bytes));
  }
  void run(cudaStream_t s) const { ZRUN_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s)); }
};

const Scrub& scrub() {
  static const Scrub the;
  return the;
}

// One GPU-alone trial of `reps` calls (after the untimed `lead`, where given) behind a spin long enough for the host
// to enqueue them: seconds per call.
double gpu_alone_trial(const std::function<void()>& one, int reps, double host_per_call_s, cudaStream_t s, Events& e,
                       const std::function<void()>& lead = {}) {
  launch_spin_kernel(1.5 * (reps + (lead ? 1 : 0)) * host_per_call_s + 50e-6, s);
  if (lead) lead();
  ZRUN_CUDA_CHECK(cudaEventRecord(e.a, s));
  for (int r = 0; r < reps; ++r) one();
  ZRUN_CUDA_CHECK(cudaEventRecord(e.b, s));
  ZRUN_CUDA_CHECK(cudaEventSynchronize(e.b));
  float ms = 0;
  ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, e.a, e.b));
  return ms * 1e-3 / reps;
}

}  // namespace

double time_behind_spin(const std::function<void()>& call, int reps, double host_per_call_s, cudaStream_t s,
                        const std::function<void()>& lead) {
  Events e;
  return gpu_alone_trial(call, reps, host_per_call_s, s, e, lead);
}

CallTime time_call(const std::function<void()>& call, cudaStream_t s, int max_reps, Cache cache, const Produced& produced) {
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
  std::vector<double> alone, inclusive, host;
  for (int t = 0; t < 5; ++t) {
    ZRUN_CUDA_CHECK(cudaEventRecord(e.a, s));
    const auto h0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) call();
    host.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count() / reps);
    ZRUN_CUDA_CHECK(cudaEventRecord(e.b, s));
    ZRUN_CUDA_CHECK(cudaEventSynchronize(e.b));
    ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, e.a, e.b));
    inclusive.push_back(ms * 1e-3 / reps);
  }
  const double host_s = median(host);
  if (cache == Cache::hot) {
    const int reps_alone = std::min(reps, 256);
    for (int t = 0; t < 5; ++t) alone.push_back(gpu_alone_trial(call, reps_alone, host_s, s, e));
  } else {
    // Each trial times the scrubs (and the rewrites of what the kernel before would have produced) alone and then
    // each call behind them: the difference is the call's.
    const Scrub& x = scrub();
    const int reps_alone = std::min(reps, 128);
    const double scrub_host_s = 5e-6 * (1 + produced.size());  // a cudaMemsetAsync's or a kernel's enqueue, generously
    auto before = [&] {
      x.run(s);
      for (const Region& r : produced) launch_rewrite(r.p, r.bytes, s);
    };
    for (int t = 0; t < 5; ++t) {
      const double only = gpu_alone_trial(before, reps_alone, scrub_host_s, s, e);
      const double both = gpu_alone_trial([&] { before(); call(); }, reps_alone, scrub_host_s + host_s, s, e);
      alone.push_back(std::max(both - only, 0.0));
    }
  }
  ZRUN_CUDA_CHECK(cudaGetLastError());
  return {median(alone), median(inclusive), host_s};  // of 5 trials: the middle one
}

}  // namespace zrun::calibrate
