// Host-side int4 packing in the qgZ byte layout (element 2j low nibble, 2j+1 high nibble, two's
// complement), for tests and for host code that inspects or prepares qgZ buffers.
#pragma once
#include <cstdint>

namespace zk {

inline uint8_t pack_int4_pair(int lo, int hi) {
  return static_cast<uint8_t>((static_cast<unsigned>(lo) & 0xFu) | ((static_cast<unsigned>(hi) & 0xFu) << 4));
}
inline int unpack_int4(const uint8_t* bytes, int64_t i) {
  const int nib = (bytes[i / 2] >> (4 * (i % 2))) & 0xF;
  return nib >= 8 ? nib - 16 : nib;
}

}  // namespace zk
