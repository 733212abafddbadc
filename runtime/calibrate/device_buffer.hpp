// A device allocation the calibrate benches own for the length of a measurement (at least 256 bytes).
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>

#include "runtime/comm/check.hpp"

namespace zrun::calibrate {

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { ZRUN_CUDA_CHECK(cudaMalloc(&p, std::max<std::size_t>(bytes, 256))); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T> T* as() const { return static_cast<T*>(p); }
};

}  // namespace zrun::calibrate
