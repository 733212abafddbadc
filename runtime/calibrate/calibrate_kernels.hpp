// zrun calibrate's own kernels (calibrate_kernels.cu): launch overhead, a spin that holds a stream, random operands,
// a buffer rewritten in place.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace zrun::calibrate {

inline constexpr int kFillF32 = 0, kFillBf16 = 1, kFillF16 = 2;

void launch_empty_kernel(cudaStream_t s);
// One thread spinning on the GPU's global timer for `seconds`: what a call timed behind it waits for.
void launch_spin_kernel(double seconds, cudaStream_t s);
// Reads and writes back `bytes` (a multiple of 16; the rest untouched) at p, 16-byte aligned: the buffer left in L2,
// dirty, as the kernel that produced it leaves it.
void launch_rewrite(void* p, std::int64_t bytes, cudaStream_t s);
// n elements of the kind (kFill*) with values in [-0.5, 0.5).
void fill_random(void* p, std::int64_t n, int kind, std::uint64_t seed, cudaStream_t s);

}  // namespace zrun::calibrate
