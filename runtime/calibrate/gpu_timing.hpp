// How zrun calibrate times a call: CUDA events around batches of back-to-back calls on one stream, so a call whose host
// side is slower than its kernel is timed at its host rate, as a training step issues it; and the host's time to
// enqueue one call, timed apart (calibration.host_issue_us, docs/timing.md "Host issue"). Timing the GPU alone (the
// calls enqueued behind a spin kernel) was tried twice on 2026-11-26 and predicted zrun's steps worse (validate/results/
// h200/NOTES.md).
#pragma once
#include <functional>

#include <cuda_runtime_api.h>

namespace zrun::calibrate {

struct CallTime {
  double gpu_s = 0;   // one call, launch to launch on the GPU, at the host's rate where that is slower (median of 5)
  double host_s = 0;  // the host's time to enqueue one call (median of the same trials)
};

// Warm-up, then 5 trials of `reps` calls each (reps chosen for ~2 ms a trial on the GPU, at most max_reps and 1000:
// a stream's launch queue holds about a thousand calls before the host blocks on it).
CallTime time_call(const std::function<void()>& call, cudaStream_t s, int max_reps = 200);

// time_call's GPU time.
inline double time_gpu(const std::function<void()>& call, cudaStream_t s, int max_reps = 200) {
  return time_call(call, s, max_reps).gpu_s;
}

}  // namespace zrun::calibrate
