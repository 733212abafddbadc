// Device bit tricks for symmetric int8 / int4 quantization without float<->int converts: rounding by
// the 1.5 * 2^23 magic add, byte / nibble packing, int4 unpacking and multiply-accumulate.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace zk::dev {

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

// Symmetric int4 quantization of x with multiplier inv, as the bits of a float whose low nibble is the
// two's-complement result: clamp x*inv to [-7, 7], add 1.5 * 2^23 (rounds to nearest even; no
// float->int convert). The float minus kInt4Magic is the quantized value.
constexpr float kInt4Magic = 12582912.0f;  // 1.5 * 2^23
__device__ __forceinline__ uint32_t quant_int4_bits(float x, float inv) {
  return __float_as_uint(fminf(fmaxf(x * inv, -7.0f), 7.0f) + kInt4Magic);
}

// Low bytes of a, b, c, d as one word, a lowest.
__device__ __forceinline__ uint32_t pack_low_bytes(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return __byte_perm(__byte_perm(a, b, 0x0040), __byte_perm(c, d, 0x0040), 0x5410);
}
// Low nibbles of n[0..8) as one word, n[0] lowest (each n[i] only needs its low nibble right).
__device__ __forceinline__ uint32_t pack_low_nibbles(const uint32_t* n) {
  const uint32_t even = pack_low_bytes(n[0], n[2], n[4], n[6]);
  const uint32_t odd = pack_low_bytes(n[1], n[3], n[5], n[7]);
  return (even & 0x0F0F0F0Fu) | ((odd << 4) & 0xF0F0F0F0u);
}

// V int4 results at p, low nibble first (one access of V/2 bytes). nib[i]: for V % 8 == 0 only its low
// nibble counts; otherwise it must be the nibble alone.
template <int V>
__device__ __forceinline__ void store_nibbles(uint8_t* p, const uint32_t (&nib)[V]) {
  constexpr int kWords = V >= 8 ? V / 8 : 1;
  uint32_t w[kWords] = {};
  if constexpr (V % 8 == 0) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = pack_low_nibbles(nib + 8 * i);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) w[i / 8] |= nib[i] << (4 * (i % 8));
  }
  using W = typename Int4Word<V>::type;
  if constexpr (V == 32) *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  else if constexpr (V == 16) *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  else *reinterpret_cast<W*>(p) = static_cast<W>(w[0]);
}

// V int4 values at p (V in 8, 16, 32: V/2 bytes, one read-only access) as V/8 words.
template <int V>
__device__ __forceinline__ void load_int4_words(const uint8_t* p, uint32_t (&w)[V / 8]) {
  if constexpr (V == 32) {
    const uint4 x = __ldg(reinterpret_cast<const uint4*>(p));
    w[0] = x.x; w[1] = x.y; w[2] = x.z; w[3] = x.w;
  } else if constexpr (V == 16) {
    const uint2 x = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = x.x; w[1] = x.y;
  } else {
    static_assert(V == 8, "V in 8, 16, 32");
    w[0] = __ldg(reinterpret_cast<const unsigned int*>(p));
  }
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

// Int4 values of word w into acc[0..8): acc[i] = fma(q_i, s, acc[i]), q_i exact. No shift per nibble:
// nibble i (i <= 4) masked in place and xored with the exponent of 2^(23-4i) (whose mantissa bit 4i
// then weighs 1) and the sign-bias bit, so the float is 2^(23-4i) + q_i + 8 and one FADD gives q_i;
// nibbles 5..7 come from w >> 12 the same way. The mask-and-xor is one LOP3: the xor constants live in
// registers (Int4Consts, set once per thread), as LOP3 takes only one immediate.
struct Int4Consts {
  uint32_t x[5];
};
__device__ __forceinline__ Int4Consts int4_consts() {
  Int4Consts c;
#pragma unroll
  for (int p = 0; p < 5; ++p) {
    const uint32_t v = (static_cast<uint32_t>(127 + 23 - 4 * p) << 23) | (0x8u << (4 * p));
    asm volatile("mov.b32 %0, %1;" : "=r"(c.x[p]) : "r"(v));  // opaque: keeps the constant in a register
  }
  return c;
}
template <int Pos>
__device__ __forceinline__ float nibble_at(uint32_t w, const Int4Consts& c) {
  constexpr uint32_t kMask = 0xFu << (4 * Pos);
  constexpr float kBias = static_cast<float>((1u << (23 - 4 * Pos)) + 8u);
  uint32_t t;
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(t) : "r"(w), "n"(kMask), "r"(c.x[Pos]));  // (w & mask) ^ x
  return __uint_as_float(t) - kBias;
}
__device__ __forceinline__ void fma_int4_word(uint32_t w, float s, float* acc, const Int4Consts& c) {
  const uint32_t hi = w >> 12;
  acc[0] = fmaf(nibble_at<0>(w, c), s, acc[0]);
  acc[1] = fmaf(nibble_at<1>(w, c), s, acc[1]);
  acc[2] = fmaf(nibble_at<2>(w, c), s, acc[2]);
  acc[3] = fmaf(nibble_at<3>(w, c), s, acc[3]);
  acc[4] = fmaf(nibble_at<4>(w, c), s, acc[4]);
  acc[5] = fmaf(nibble_at<2>(hi, c), s, acc[5]);
  acc[6] = fmaf(nibble_at<3>(hi, c), s, acc[6]);
  acc[7] = fmaf(nibble_at<4>(hi, c), s, acc[7]);
}

// Symmetric int8 quantization of x with multiplier inv, as the bits of a float whose low byte is the
// two's-complement result: clamp to [-127, 127] (integer bounds, so the same as clamping after rounding),
// then add 1.5 * 2^23, which rounds to nearest even like rintf. No float->int convert.
__device__ __forceinline__ uint32_t quant_int8_bits(float x, float inv) {
  constexpr float kMagic = 12582912.0f;
  return __float_as_uint(fminf(fmaxf(x * inv, -127.0f), 127.0f) + kMagic);
}

}  // namespace zk::dev
