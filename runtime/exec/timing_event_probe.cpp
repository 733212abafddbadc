#include "runtime/exec/timing_event_probe.hpp"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/comm/check.hpp"
#include "runtime/exec/elementwise.hpp"

namespace zrun {

double timing_event_cost_s(cudaStream_t s) {
  constexpr int kOps = 200;
  void* buf = nullptr;
  cudaStream_t side = nullptr;
  cudaEvent_t gate = nullptr, a = nullptr, b = nullptr;
  std::vector<cudaEvent_t> marks(kOps, nullptr);
  ZRUN_CUDA_CHECK(cudaMalloc(&buf, 256));
  ZRUN_CUDA_CHECK(cudaMemsetAsync(buf, 0, 256, s));
  ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  ZRUN_CUDA_CHECK(cudaEventCreateWithFlags(&gate, cudaEventDisableTiming));
  ZRUN_CUDA_CHECK(cudaEventCreate(&a));
  ZRUN_CUDA_CHECK(cudaEventCreate(&b));
  for (cudaEvent_t& e : marks) ZRUN_CUDA_CHECK(cudaEventCreate(&e));
  // Seconds per op of one trial: the stream held for 2 ms (longer than the host takes to enqueue the ops), then timed
  // from the first op's start to the last's end.
  auto trial = [&](bool with_events) {
    ZRUN_CUDA_CHECK(cudaLaunchHostFunc(side, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(2)); },
                                       nullptr));
    ZRUN_CUDA_CHECK(cudaEventRecord(gate, side));
    ZRUN_CUDA_CHECK(cudaStreamWaitEvent(s, gate, 0));
    ZRUN_CUDA_CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < kOps; ++i) {
      add_inplace(ElemType::fp32, buf, static_cast<char*>(buf) + 128, 32, s);
      if (with_events) ZRUN_CUDA_CHECK(cudaEventRecord(marks[i], s));
    }
    ZRUN_CUDA_CHECK(cudaEventRecord(b, s));
    ZRUN_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3 / kOps;
  };
  trial(true);  // warm-up
  std::vector<double> diff;
  for (int t = 0; t < 5; ++t) diff.push_back(trial(true) - trial(false));
  std::sort(diff.begin(), diff.end());
  for (cudaEvent_t e : marks) cudaEventDestroy(e);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaEventDestroy(gate);
  cudaStreamDestroy(side);
  cudaFree(buf);
  return std::max(0.0, diff[diff.size() / 2]);
}

}  // namespace zrun
