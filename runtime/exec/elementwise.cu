#include "runtime/exec/elementwise.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace zrun {
namespace {

template <class T>
__global__ void add_kernel(T* dst, const T* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[i] = static_cast<T>(static_cast<float>(dst[i]) + static_cast<float>(src[i]));
}

template <class T>
void launch(void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const int threads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((n + threads - 1) / threads, 4096);
  add_kernel<T><<<static_cast<unsigned>(blocks), threads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src), n);
}

template <class S, class D>
__global__ void convert_kernel(D* dst, const S* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[i] = static_cast<D>(static_cast<float>(src[i]));
}

template <class S, class D>
void launch_convert(void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  const int threads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((n + threads - 1) / threads, 4096);
  convert_kernel<S, D><<<static_cast<unsigned>(blocks), threads, 0, s>>>(static_cast<D*>(dst), static_cast<const S*>(src),
                                                                         n);
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
    case ElemType::fp32: launch<float>(dst, src, n, s); break;
    case ElemType::bf16: launch<__nv_bfloat16>(dst, src, n, s); break;
    case ElemType::fp16: launch<__half>(dst, src, n, s); break;
  }
}

}  // namespace zrun
