// How zrun calibrate times a call: CUDA events around batches of back-to-back calls on one stream, enqueued while a
// spin kernel holds the stream, so that each call is timed on the GPU alone; and the host's time to enqueue them,
// timed apart. A training step's time is both: the GPU's work, and the host's issue of it where that is slower
// (efficiency.host_issue, docs/timing.md "Host issue").
#pragma once
#include <functional>

#include <cuda_runtime_api.h>

namespace zrun::calibrate {

struct CallTime {
  double gpu_s = 0;   // one call on the GPU, launch to launch (median of 5 trials)
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
