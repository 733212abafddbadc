// Elementwise parts of the MLP (the projections are GEMMs in model.cpp): SwiGLU act = silu(gate) * up
// (Llama) or act = gelu(up) with the tanh approximation (GPT-2 "gelu_new"), and their backward.
#include "runtime/model/device_types.cuh"
#include "runtime/model/layers.hpp"

namespace zrun::model {

namespace {
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)

__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(kGeluC * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float gelu_grad(float x) {
  const float u = kGeluC * (x + 0.044715f * x * x * x);
  const float t = tanhf(u);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
}

#define ZR_GRID_LOOP(i, n)                                                                          \
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < (n);               \
       i += (std::int64_t)gridDim.x * blockDim.x)

template <class T> __global__ void k_swiglu(const T* g, const T* u, T* a, std::int64_t n) {
  ZR_GRID_LOOP(i, n) {
    const float x = to_f(g[i]);
    a[i] = from_f<T>(x * sigmoid(x) * to_f(u[i]));
  }
}
template <class T> __global__ void k_gelu(const T* p, T* a, std::int64_t n) {
  ZR_GRID_LOOP(i, n) a[i] = from_f<T>(gelu(to_f(p[i])));
}
template <class T> __global__ void k_swiglu_bwd_up(const T* da, const T* g, T* du, std::int64_t n) {
  ZR_GRID_LOOP(i, n) {
    const float x = to_f(g[i]);
    du[i] = from_f<T>(to_f(da[i]) * x * sigmoid(x));
  }
}
template <class T> __global__ void k_swiglu_bwd_gate(const T* da, const T* g, const T* u, T* dg, std::int64_t n) {
  ZR_GRID_LOOP(i, n) {
    const float x = to_f(g[i]), sg = sigmoid(x);
    dg[i] = from_f<T>(to_f(da[i]) * to_f(u[i]) * sg * (1.0f + x * (1.0f - sg)));
  }
}
template <class T> __global__ void k_gelu_bwd(const T* da, const T* p, T* dp, std::int64_t n) {
  ZR_GRID_LOOP(i, n) dp[i] = from_f<T>(to_f(da[i]) * gelu_grad(to_f(p[i])));
}

unsigned blocks(std::int64_t n) { return std::min<std::int64_t>(grid_for(n, 256), 65535 * 8); }
}  // namespace

void swiglu_forward(DType dt, const void* gate, const void* up, void* act, std::int64_t n, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    k_swiglu<T><<<blocks(n), 256, 0, s>>>(static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(act), n);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void gelu_forward(DType dt, const void* pre, void* act, std::int64_t n, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    k_gelu<T><<<blocks(n), 256, 0, s>>>(static_cast<const T*>(pre), static_cast<T*>(act), n);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void swiglu_backward_up(DType dt, const void* dact, const void* gate, void* dup, std::int64_t n, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    k_swiglu_bwd_up<T><<<blocks(n), 256, 0, s>>>(static_cast<const T*>(dact), static_cast<const T*>(gate),
                                                 static_cast<T*>(dup), n);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void swiglu_backward_gate(DType dt, const void* dact, const void* gate, const void* up, void* dgate, std::int64_t n,
                          cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    k_swiglu_bwd_gate<T><<<blocks(n), 256, 0, s>>>(static_cast<const T*>(dact), static_cast<const T*>(gate),
                                                   static_cast<const T*>(up), static_cast<T*>(dgate), n);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void gelu_backward(DType dt, const void* dact, const void* pre, void* dpre, std::int64_t n, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    k_gelu_bwd<T><<<blocks(n), 256, 0, s>>>(static_cast<const T*>(dact), static_cast<const T*>(pre),
                                            static_cast<T*>(dpre), n);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

}  // namespace zrun::model
