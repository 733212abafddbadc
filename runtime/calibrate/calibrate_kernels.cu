// The kernels zrun calibrate needs of its own: an empty kernel (launch overhead), a spin kernel (holds a stream while
// the host enqueues the calls timed behind it), a fill of random finite values (GEMM operands, so that tensor cores
// switch real bits, not zeros) and a rewrite of a buffer in place (as the kernel that produced it leaves it).
#include "runtime/calibrate/calibrate_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace zrun::calibrate {

namespace {
__global__ void empty_kernel() {}

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

__device__ float uniform(std::uint64_t i, std::uint64_t seed) {
  std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33;
  return static_cast<float>(x >> 40) / 16777216.0f - 0.5f;  // [-0.5, 0.5)
}

template <class T>
__global__ void fill_kernel(T* p, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<T>(uniform(i, seed));
}
// Every 16 bytes read and written back unchanged (xor with `zero`, 0 at run time, so that the store is not elided).
__global__ void rewrite_kernel(uint4* p, std::int64_t n, unsigned zero) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    uint4 v = p[i];
    v.x ^= zero;
    p[i] = v;
  }
}
}  // namespace

void launch_empty_kernel(cudaStream_t s) { empty_kernel<<<1, 32, 0, s>>>(); }

void launch_rewrite(void* p, std::int64_t bytes, cudaStream_t s) {
  const std::int64_t n = bytes / 16;
  if (n <= 0) return;
  rewrite_kernel<<<static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, 4096)), 256, 0, s>>>(
      static_cast<uint4*>(p), n, 0u);
}

void launch_spin_kernel(double seconds, cudaStream_t s) {
  spin_kernel<<<1, 1, 0, s>>>(static_cast<unsigned long long>(seconds * 1e9));
}

void fill_random(void* p, std::int64_t n, int element_bytes_and_kind, std::uint64_t seed, cudaStream_t s) {
  const int blocks = 1024, threads = 256;
  switch (element_bytes_and_kind) {
    case kFillF32: fill_kernel<<<blocks, threads, 0, s>>>(static_cast<float*>(p), n, seed); break;
    case kFillBf16: fill_kernel<<<blocks, threads, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed); break;
    case kFillF16: fill_kernel<<<blocks, threads, 0, s>>>(static_cast<__half*>(p), n, seed); break;
  }
}

}  // namespace zrun::calibrate
