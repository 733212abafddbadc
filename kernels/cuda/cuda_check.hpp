// The one error path for CUDA calls in kernels/: ZK_CUDA_CHECK(call) throws zk::CudaError naming the
// call, the file and the line; ZK_CUDA_CHECK_LAUNCH() does the same for the last kernel launch.
#pragma once
#include <cuda_runtime_api.h>
#include <stdexcept>
#include <string>

namespace zk {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw CudaError(std::string("CUDA error ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ") in " +
                  call + " at " + file + ":" + std::to_string(line));
}

}  // namespace zk

#define ZK_CUDA_CHECK(call)                                                        \
  do {                                                                             \
    const cudaError_t zk_err_ = (call);                                            \
    if (zk_err_ != cudaSuccess) ::zk::throw_cuda_error(zk_err_, #call, __FILE__, __LINE__); \
  } while (0)

#define ZK_CUDA_CHECK_LAUNCH() ZK_CUDA_CHECK(cudaGetLastError())
