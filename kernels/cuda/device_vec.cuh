// Device helpers: float <-> 16-bit conversion by type tag, vector loads/stores of 16-bit elements (as
// floats, or 8 raw in a uint4 with a packed absmax), warp- and block-wide max. Only included by .cu files.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>
#include <type_traits>

namespace zk::dev {

template <class T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }

template <class T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }

// Raw storage of V elements of T, aligned to its size up to 16 bytes: one load/store of up to 16
// bytes, or several 16-byte ones for larger vectors.
template <class T, int V> struct alignas(sizeof(T) * V > 16 ? 16 : sizeof(T) * V) Vec { T v[V]; };

template <class T, int V>
__device__ __forceinline__ void load_f(const T* p, float (&out)[V]) {
  const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(p);
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = to_f<T>(x.v[i]);
}
template <class T, int V>
__device__ __forceinline__ void store_f(T* p, const float (&in)[V]) {
  Vec<T, V> x;
#pragma unroll
  for (int i = 0; i < V; ++i) x.v[i] = from_f<T>(in[i]);
  *reinterpret_cast<Vec<T, V>*>(p) = x;
}

// Eight 16-bit floats (T = __nv_bfloat16 or __half) held raw in a uint4.
template <class T> struct Pair2;
template <> struct Pair2<__nv_bfloat16> { using type = __nv_bfloat162; };
template <> struct Pair2<__half> { using type = __half2; };

// Running max of |v| over the 16-bit pairs of x (exact; NaN ignored, as by fmaxf).
template <class T>
__device__ __forceinline__ typename Pair2<T>::type absmax_raw8(typename Pair2<T>::type m, const uint4& x) {
  using P2 = typename Pair2<T>::type;
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) m = __hmax2(m, __habs2(*reinterpret_cast<const P2*>(&w[i])));
  return m;
}
template <class T>
__device__ __forceinline__ float pair_max(typename Pair2<T>::type m) {
  return fmaxf(__low2float(m), __high2float(m));
}
// The eight values of x as floats.
template <class T>
__device__ __forceinline__ void raw8_to_f(const uint4& x, float (&f)[8]) {
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      f[2 * i] = __uint_as_float(w[i] << 16);
      f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    } else {
      const float2 v = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
      f[2 * i] = v.x;
      f[2 * i + 1] = v.y;
    }
  }
}
// Eight 16-bit values at p[i..i+8) as a raw uint4, read-only path; zeros past len (last block only).
template <class T>
__device__ __forceinline__ uint4 load_raw8(const T* p, int64_t i, int64_t len) {
  if (i + 8 <= len) return __ldg(reinterpret_cast<const uint4*>(p + i));
  uint16_t h[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) h[j] = i + j < len ? reinterpret_cast<const uint16_t*>(p)[i + j] : uint16_t{0};
  return make_uint4(h[0] | (uint32_t{h[1]} << 16), h[2] | (uint32_t{h[3]} << 16), h[4] | (uint32_t{h[5]} << 16),
                    h[6] | (uint32_t{h[7]} << 16));
}

// Max over the warp (every lane gets it).
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Max over the thread block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_max_s[32];
  v = warp_max(v);
  if ((threadIdx.x & 31) == 0) warp_max_s[threadIdx.x >> 5] = v;
  __syncthreads();  // one barrier: every thread then reads the (at most 32) warp maxima itself
  const int nwarps = (blockDim.x + 31) >> 5;
  float m = warp_max_s[0];
  for (int w = 1; w < nwarps; ++w) m = fmaxf(m, warp_max_s[w]);
  return m;
}

}  // namespace zk::dev
