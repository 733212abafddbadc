// What a CUDA timing event costs the GPU's timeline between two ops of a stream (zrun's op-timed step records one
// after each op, so each op's measured time carries one: about 2.1 us on an H200, docs/timing.md "How calibrate times a
// call"). zsim validate takes it off each op's measured time.
#pragma once
#include <cuda_runtime_api.h>

namespace zrun {

// 200 tiny kernels on `s` (an add of 32 floats), enqueued while the stream is held (a host function on another stream
// gates it), with and then without a timing event after each (each its own event, as the executor's): the difference
// per kernel, the median of 5 trials. Between memsets instead of kernels an event cost 1.3 us on the H200. Synchronises
// `s`.
double timing_event_cost_s(cudaStream_t s);

}  // namespace zrun
