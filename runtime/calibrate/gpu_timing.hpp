// How zrun calibrate times a call on the GPU: CUDA events around batches of back-to-back calls on one stream, enqueued
// while a spin kernel holds the stream, so that each is timed on the GPU alone: a training step keeps the GPU's queue
// full and hides the host's launch overhead, which varies from machine to machine (a 16 x 16 x 16 GEMM launch to
// launch from the host took 5.9, 6.6 and 10.9 us on three lent H200s).
#pragma once
#include <functional>

#include <cuda_runtime_api.h>

namespace zrun::calibrate {

// Median seconds of one call: warm-up, then 5 trials of `reps` calls each (reps chosen for ~2 ms a trial, at most
// max_reps).
double time_gpu(const std::function<void()>& call, cudaStream_t s, int max_reps = 200);

}  // namespace zrun::calibrate
