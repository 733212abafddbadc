// The one error path for CUDA and NCCL calls in zrun: ZRUN_CUDA_CHECK(call) / ZRUN_NCCL_CHECK(call) throw
// zrun::DeviceError naming the call, the error, the file and the line (the style of
// kernels/cuda/cuda_check.hpp).
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <stdexcept>
#include <string>

namespace zrun {

struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw DeviceError(std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ") in " +
                    call + " at " + file + ":" + std::to_string(line));
}

[[noreturn]] inline void throw_nccl_error(ncclResult_t err, const char* call, const char* file, int line) {
  const char* last = ncclGetLastError(nullptr);
  throw DeviceError(std::string("NCCL error ") + ncclGetErrorString(err) + " in " + call + " at " + file + ":" +
                    std::to_string(line) + (last && *last ? std::string(" (") + last + ")" : std::string()));
}

}  // namespace zrun

#define ZRUN_CUDA_CHECK(call)                                                                 \
  do {                                                                                        \
    const cudaError_t zrun_err_ = (call);                                                     \
    if (zrun_err_ != cudaSuccess) ::zrun::throw_cuda_error(zrun_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define ZRUN_NCCL_CHECK(call)                                                                 \
  do {                                                                                        \
    const ncclResult_t zrun_err_ = (call);                                                    \
    if (zrun_err_ != ncclSuccess) ::zrun::throw_nccl_error(zrun_err_, #call, __FILE__, __LINE__); \
  } while (0)
