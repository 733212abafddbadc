#include "runtime/exec/elementwise.hpp"

#include <cuda_bf16.h>
#include <cstdint>
#include <algorithm>
#include <cuda_fp16.h>

namespace zrun {
namespace {

// Elementwise d2d kernels at the bandwidth limit: V elements per thread through one 16-byte access of the wider
// side when both pointers allow it, a grid-stride loop, the last n % V elements one by one.
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

// dst[i] = op(src[i], dst[i]) over n elements: Add adds (in fp32, rounded once), else converts S -> D.
template <class S, class D, int V, bool Add>
__global__ void elementwise_kernel(D* dst, const S* src, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t packs = V > 1 ? n / V : 0;
  for (std::int64_t p = first; p < packs; p += stride) {
    const Pack<S, V> in = reinterpret_cast<const Pack<S, V>*>(src)[p];
    Pack<D, V> out;
    if constexpr (Add) out = reinterpret_cast<const Pack<D, V>*>(dst)[p];
#pragma unroll
    for (int j = 0; j < V; ++j)
      out.v[j] = Add ? static_cast<D>(static_cast<float>(out.v[j]) + static_cast<float>(in.v[j]))
                     : static_cast<D>(static_cast<float>(in.v[j]));
    reinterpret_cast<Pack<D, V>*>(dst)[p] = out;
  }
  for (std::int64_t i = packs * V + first; i < n; i += stride)
    dst[i] = Add ? static_cast<D>(static_cast<float>(dst[i]) + static_cast<float>(src[i]))
                 : static_cast<D>(static_cast<float>(src[i]));
}

template <class S, class D, bool Add>
void launch(void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  constexpr int V = 16 / (sizeof(S) > sizeof(D) ? sizeof(S) : sizeof(D));
  const bool aligned = reinterpret_cast<std::uintptr_t>(dst) % (sizeof(D) * V) == 0 &&
                       reinterpret_cast<std::uintptr_t>(src) % (sizeof(S) * V) == 0;
  const int threads = 256;
  const std::int64_t work = aligned ? (n + V - 1) / V : n;
  const std::int64_t blocks = std::min<std::int64_t>((work + threads - 1) / threads, 8192);
  if (aligned)
    elementwise_kernel<S, D, V, Add><<<static_cast<unsigned>(blocks), threads, 0, s>>>(static_cast<D*>(dst),
                                                                                      static_cast<const S*>(src), n);
  else
    elementwise_kernel<S, D, 1, Add><<<static_cast<unsigned>(blocks), threads, 0, s>>>(static_cast<D*>(dst),
                                                                                      static_cast<const S*>(src), n);
}

template <class S, class D>
void launch_convert(void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  launch<S, D, false>(dst, src, n, s);
}

template <class S>
void convert_from(ElemType to, void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  switch (to) {
    case ElemType::fp32: launch_convert<S, float>(dst, src, n, s); break;
    case ElemType::bf16: launch_convert<S, __nv_bfloat16>(dst, src, n, s); break;
    case ElemType::fp16: launch_convert<S, __half>(dst, src, n, s); break;
  }
}

}  // namespace

void convert(ElemType from, ElemType to, void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  switch (from) {
    case ElemType::fp32: convert_from<float>(to, dst, src, n, s); break;
    case ElemType::bf16: convert_from<__nv_bfloat16>(to, dst, src, n, s); break;
    case ElemType::fp16: convert_from<__half>(to, dst, src, n, s); break;
  }
}

void add_inplace(ElemType t, void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  switch (t) {
    case ElemType::fp32: launch<float, float, true>(dst, src, n, s); break;
    case ElemType::bf16: launch<__nv_bfloat16, __nv_bfloat16, true>(dst, src, n, s); break;
    case ElemType::fp16: launch<__half, __half, true>(dst, src, n, s); break;
  }
}

}  // namespace zrun
