// Small launch helpers for the .cu files: stream cast, alignment test, block-count arithmetic.
#pragma once
#include <cuda_runtime_api.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include "kernels/kernel_types.hpp"

namespace zk::detail {

inline cudaStream_t as_stream(StreamHandle s) { return static_cast<cudaStream_t>(s); }
inline bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Threads for a block-per-group kernel: enough to cover the group once with vectors of v, 32..256.
inline int group_threads(int64_t group_elems, int v) {
  int64_t t = ceil_div(group_elems, v);
  t = ceil_div(t, 32) * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 256 ? 256 : t));
}
inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("zk kernels: " + what);
}

}  // namespace zk::detail
