// Token embedding (+ learned absolute positions): forward gather, backward scatter-add.
#include "runtime/model/device_types.cuh"
#include "runtime/model/layers.hpp"

namespace zrun::model {

namespace {
template <class T>
__global__ void embed_fwd(const std::int32_t* tok, const T* table, const T* pos, T* out, std::int64_t n,
                          std::int64_t seq, std::int64_t h) {
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n;
       i += (std::int64_t)gridDim.x * blockDim.x) {
    const std::int64_t t = i / h, c = i % h;
    float v = to_f(table[(std::int64_t)tok[t] * h + c]);
    if (pos) v += to_f(pos[(t % seq) * h + c]);
    out[i] = from_f<T>(v);
  }
}

__device__ __forceinline__ void atomic_add_t(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add_t(__nv_bfloat16* p, float v) { atomicAdd(p, __float2bfloat16(v)); }
__device__ __forceinline__ void atomic_add_t(__half* p, float v) { atomicAdd(p, __float2half(v)); }

template <class T>
__global__ void embed_bwd_table(const std::int32_t* tok, const T* dout, T* dtable, std::int64_t n, std::int64_t h) {
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n;
       i += (std::int64_t)gridDim.x * blockDim.x) {
    const std::int64_t t = i / h, c = i % h;
    atomic_add_t(&dtable[(std::int64_t)tok[t] * h + c], to_f(dout[i]));
  }
}

template <class T>
__global__ void embed_bwd_pos(const T* dout, T* dpos, std::int64_t batch, std::int64_t seq, std::int64_t h) {
  const std::int64_t n = seq * h;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n;
       i += (std::int64_t)gridDim.x * blockDim.x) {
    float acc = to_f(dpos[i]);
    for (std::int64_t b = 0; b < batch; ++b) acc += to_f(dout[b * n + i]);
    dpos[i] = from_f<T>(acc);
  }
}

unsigned blocks(std::int64_t n) { return std::min<std::int64_t>(grid_for(n, 256), 65535 * 8); }
}  // namespace

void embedding_forward(DType dt, const std::int32_t* tok, const void* table, const void* positions, void* out,
                       std::int64_t tokens, std::int64_t seq, std::int64_t h, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    const std::int64_t n = tokens * h;
    embed_fwd<T><<<blocks(n), 256, 0, s>>>(tok, static_cast<const T*>(table), static_cast<const T*>(positions),
                                            static_cast<T*>(out), n, seq, h);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void embedding_backward(DType dt, const std::int32_t* tok, const void* dout, void* d_table, void* d_positions,
                        std::int64_t tokens, std::int64_t seq, std::int64_t h, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    const std::int64_t n = tokens * h;
    embed_bwd_table<T><<<blocks(n), 256, 0, s>>>(tok, static_cast<const T*>(dout), static_cast<T*>(d_table), n, h);
    if (d_positions)
      embed_bwd_pos<T><<<blocks(seq * h), 256, 0, s>>>(static_cast<const T*>(dout), static_cast<T*>(d_positions),
                                                       tokens / seq, seq, h);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

}  // namespace zrun::model
