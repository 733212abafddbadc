// Device helpers: float <-> 16-bit conversion by type tag, vector loads/stores of 1..8 16-bit elements,
// int4 nibble packing, and a block-wide max reduction. Only included by the .cu files.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

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

// Quantize x with multiplier inv (= qmax / absmax, 0 when absmax == 0) to a symmetric integer in [-qmax, qmax].
__device__ __forceinline__ int quant_sym(float x, float inv, int qmax) {
  float r = rintf(x * inv);
  r = fminf(fmaxf(r, -static_cast<float>(qmax)), static_cast<float>(qmax));
  return static_cast<int>(r);
}

// V int4 values (V in 2..32, even) packed low nibble first into V/2 bytes, moved as one access of
// V/2 bytes (1, 2, 4, 8 or 16).
template <int V> struct Int4Word;
template <> struct Int4Word<2> { using type = uint8_t; };
template <> struct Int4Word<4> { using type = uint16_t; };
template <> struct Int4Word<8> { using type = uint32_t; };
template <> struct Int4Word<16> { using type = uint2; };
template <> struct Int4Word<32> { using type = uint4; };

// Nibble i of word w as a float, without the quarter-rate integer->float convert: the biased nibble
// (0..15) goes into the mantissa of 2^23, and 2^23 + 8 is subtracted.
__device__ __forceinline__ float nibble_to_float(uint32_t w, int shift) {
  const uint32_t u = ((w >> shift) & 0xFu) ^ 0x8u;
  return __uint_as_float(0x4B000000u | u) - 8388616.0f;
}

// Symmetric int4 quantization of x with multiplier inv: clamps x*inv to [-7, 7], rounds to nearest even by
// adding 1.5 * 2^23 (no float->int convert); returns the two's-complement nibble and sets qf to its value.
__device__ __forceinline__ uint32_t quant_nibble(float x, float inv, float& qf) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: multiple of 16, so its low mantissa bits are the integer's
  const float y = fminf(fmaxf(x * inv, -7.0f), 7.0f);
  const float big = y + kMagic;
  qf = big - kMagic;
  return __float_as_uint(big) & 0xFu;
}

template <int V>
__device__ __forceinline__ void store_nibbles(uint8_t* p, const uint32_t (&nib)[V]) {
  constexpr int kWords = V >= 8 ? V / 8 : 1;
  uint32_t w[kWords] = {};
#pragma unroll
  for (int i = 0; i < V; ++i) w[i / 8] |= nib[i] << (4 * (i % 8));
  using W = typename Int4Word<V>::type;
  if constexpr (V == 32) *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  else if constexpr (V == 16) *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  else *reinterpret_cast<W*>(p) = static_cast<W>(w[0]);
}

// V int4 values at p (V/2 bytes, one access) as floats.
template <int V>
__device__ __forceinline__ void load_int4_f(const uint8_t* p, float (&q)[V]) {
  constexpr int kWords = V >= 8 ? V / 8 : 1;
  uint32_t w[kWords];
  if constexpr (V == 32) {
    const uint4 x = __ldg(reinterpret_cast<const uint4*>(p));
    w[0] = x.x; w[1] = x.y; w[2] = x.z; w[3] = x.w;
  } else if constexpr (V == 16) {
    const uint2 x = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = x.x; w[1] = x.y;
  } else {
    w[0] = *reinterpret_cast<const typename Int4Word<V>::type*>(p);
  }
#pragma unroll
  for (int i = 0; i < V; ++i) q[i] = nibble_to_float(w[i / 8], 4 * (i % 8));
}

// Max over the thread block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_max[32];
  __shared__ float result;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_max[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int nwarps = (blockDim.x + 31) >> 5;
    float w = lane < nwarps ? warp_max[lane] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) w = fmaxf(w, __shfl_xor_sync(0xffffffffu, w, o));
    if (lane == 0) result = w;
  }
  __syncthreads();
  return result;
}

}  // namespace zk::dev
