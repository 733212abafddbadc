// How zrun calibrate times a call on the GPU: CUDA events around batches of back-to-back calls on one stream, so a
// call whose host side is slower than its kernel is timed at its host rate, as a training step issues it.
#pragma once
#include <functional>

#include <cuda_runtime_api.h>

namespace zrun::calibrate {

// Median seconds of one call: warm-up, then 5 trials of `reps` calls each (reps chosen for ~2 ms a trial, at most
// max_reps).
double time_gpu(const std::function<void()>& call, cudaStream_t s, int max_reps = 200);

}  // namespace zrun::calibrate
