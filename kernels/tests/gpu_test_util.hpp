// Test helpers for the GPU kernel tests: skip when no device, a device buffer that is poisoned on
// creation, and host<->device copies. Tests only; launcher headers stay free of CUDA.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <string>
#include <vector>
#include "kernels/cuda/cuda_check.hpp"

namespace zk::test {

// Empty string when a CUDA device is usable, else why not.
inline std::string no_gpu_reason() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return std::string("no CUDA device: cudaGetDeviceCount failed: ") + cudaGetErrorString(e);
  if (count == 0) return "no CUDA device: cudaGetDeviceCount returned 0";
  return {};
}

#define ZK_REQUIRE_GPU()                                                   \
  do {                                                                     \
    const std::string zk_why_ = ::zk::test::no_gpu_reason();               \
    if (!zk_why_.empty()) GTEST_SKIP() << zk_why_ << " (GPU test skipped)"; \
  } while (0)

// Device array of n T, filled with 0xFF bytes (NaN for floats and 16-bit floats, -1 for int8).
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    ZK_CUDA_CHECK(cudaMalloc(&p_, (n ? n : 1) * sizeof(T)));
    poison();
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return static_cast<T*>(p_); }
  size_t size() const { return n_; }
  void poison() { ZK_CUDA_CHECK(cudaMemset(p_, 0xFF, (n_ ? n_ : 1) * sizeof(T))); }
  void upload(const std::vector<T>& host) {
    ZK_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    ZK_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> out(n_);
    ZK_CUDA_CHECK(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace zk::test
