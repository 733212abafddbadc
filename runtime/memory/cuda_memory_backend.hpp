// MemoryBackend on CUDA: device memory (cudaMalloc) for the gpu tier, pinned host memory (cudaHostAlloc)
// for the cpu tier; fences are CUDA events recorded on the freeing stream, reused once done.
#pragma once
#include <cuda_runtime_api.h>

#include <map>
#include <vector>

#include "runtime/memory/memory_backend.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun {

class CudaMemoryBackend : public MemoryBackend {
 public:
  explicit CudaMemoryBackend(zsim::Tier tier);  // gpu or cpu (pinned)
  ~CudaMemoryBackend() override;

  std::byte* reserve(zsim::Bytes bytes) override;
  void release(std::byte* base) override;
  FenceId record_fence(StreamHandle stream) override;
  bool fence_done(FenceId fence) override;
  void wait_fence(FenceId fence) override;

 private:
  cudaEvent_t event(FenceId fence) const;
  void retire(FenceId fence);  // its event back to the spares
  zsim::Tier tier_;
  FenceId next_ = 1;
  std::map<FenceId, cudaEvent_t> events_;
  std::vector<cudaEvent_t> spare_;  // events of finished fences, recorded again by later frees
};

}  // namespace zrun
