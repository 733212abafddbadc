// How zrun calibrate times a call: CUDA events around batches of back-to-back calls on one stream. On the GPU alone,
// behind a spin kernel that holds the stream until the host has enqueued the whole batch: the GPU's own cost of the
// call, which the profile's figures are fitted on, whatever the host's speed. Host-inclusive, the batch issued as it
// comes (a call whose host side is slower than its kernel is then timed at the host's rate): recorded beside. And the
// host's time to enqueue one call (calibration.host_issue_us), which the profile's efficiency.host_issue charges
// zsim's issuing thread (docs/timing.md "Host issue").
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <cuda_runtime_api.h>

namespace zrun::calibrate {

struct CallTime {
  double gpu_s = 0;             // one call on the GPU alone, launch to launch with the host ahead (median of 5)
  double host_inclusive_s = 0;  // one call issued as it comes, back to back, at the host's rate where that is slower
  double host_s = 0;            // the host's time to enqueue one call (median of the host-inclusive trials)
};

// Where the GPU-alone calls find their operands. hot: the call repeated back to back, its operands in L2 from the
// call before. cold: every call after a write of twice the L2's bytes (cudaMemsetAsync), the scrub's own time, timed
// in the same trial, taken off: as a step's kernels find their weights and most inputs evicted by the kernels between
// (launch_probe on the H200, 2026-11-27: a 1024 x 768 RMSNorm 5.3 us hot, 6.9 us cold, 6.2 us in the suite's step;
// a 768 x 1024 x 768 GEMM 5.2 / 6.2 / 5.7-6.9 us).
enum class Cache { hot, cold };

// With Cache::cold: the operands of the call that the kernel before it in a step has just written (a norm's input,
// a GEMM's activations, the loss's logits), rewritten in place after the scrub (launch_rewrite, also taken off), so
// that the call finds them in L2 as a step's does where they fit, and the rest cold. Empty: everything cold.
struct Region {
  void* p = nullptr;
  std::int64_t bytes = 0;
};
using Produced = std::vector<Region>;

// Warm-up, then 5 trials of `reps` calls each issued as they come (reps chosen for ~2 ms a trial on the GPU, at most
// max_reps and 1000: a stream's launch queue holds about a thousand calls before the host blocks on it), then 5
// trials on the GPU alone (at most 256 calls hot, 128 cold: the batch must fit in the launch queue behind the spin).
CallTime time_call(const std::function<void()>& call, cudaStream_t s, int max_reps = 200, Cache cache = Cache::hot,
                   const Produced& produced = {});

// One GPU-alone trial as time_call makes them: `lead` (untimed; none if empty) and `reps` calls enqueued behind a spin
// long enough for the host to enqueue them at host_per_call_s each, then the calls timed back to back: seconds per
// call. Collectives among ranks lead with one call that every rank meets at (their spins end at different moments).
double time_behind_spin(const std::function<void()>& call, int reps, double host_per_call_s, cudaStream_t s,
                        const std::function<void()>& lead = {});

// time_call's GPU-alone time.
inline double time_gpu(const std::function<void()>& call, cudaStream_t s, int max_reps = 200, Cache cache = Cache::hot,
                       const Produced& produced = {}) {
  return time_call(call, s, max_reps, cache, produced).gpu_s;
}

}  // namespace zrun::calibrate
