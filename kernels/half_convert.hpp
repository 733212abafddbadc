// Host-side conversions between float and the 16-bit formats (bf16, IEEE fp16), round to nearest even.
// Used by the CPU Adam scalar path and by the tests' references; bit-exact with the CUDA intrinsics.
#pragma once
#include <cstdint>
#include <cstring>
#include <cmath>

namespace zk {

inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (man << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t au = u & 0x7fffffffu;
  if (au > 0x7f800000u) return sign | 0x7e00u;                 // NaN
  if (au >= 0x477ff000u) return sign | 0x7c00u;                // rounds to >= 65520: inf
  if (au < 0x38800000u) {                                       // below 2^-14: subnormal half
    const float a = bits_float(au);
    const float scaled = a * 16777216.0f;                       // a / 2^-24, exact
    return sign | static_cast<uint16_t>(std::nearbyint(scaled)); // default rounding: nearest even
  }
  uint32_t r = au + 0xfffu + ((au >> 13) & 1u);                 // round mantissa to 10 bits
  return sign | static_cast<uint16_t>(((r >> 13) - (112u << 10)));
}

inline float half16_to_float(uint16_t h, bool is_bf16) { return is_bf16 ? bf16_to_float(h) : fp16_to_float(h); }
inline uint16_t float_to_half16(float f, bool is_bf16) { return is_bf16 ? float_to_bf16(f) : float_to_fp16(f); }

}  // namespace zk
