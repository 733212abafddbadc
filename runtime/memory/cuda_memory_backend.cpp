#include "runtime/memory/cuda_memory_backend.hpp"

#include <stdexcept>

#include "runtime/comm/check.hpp"

namespace zrun {

CudaMemoryBackend::CudaMemoryBackend(zsim::Tier tier) : tier_(tier) {
  if (tier != zsim::Tier::gpu && tier != zsim::Tier::cpu)
    throw std::invalid_argument("CudaMemoryBackend: only the gpu and cpu tiers live in CUDA memory");
}

CudaMemoryBackend::~CudaMemoryBackend() {
  for (const auto& [id, e] : events_) cudaEventDestroy(e);
  for (cudaEvent_t e : spare_) cudaEventDestroy(e);
}

std::byte* CudaMemoryBackend::reserve(zsim::Bytes bytes) {
  void* p = nullptr;
  const cudaError_t err = tier_ == zsim::Tier::gpu ? cudaMalloc(&p, static_cast<std::size_t>(bytes))
                                                   : cudaHostAlloc(&p, static_cast<std::size_t>(bytes), cudaHostAllocDefault);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear the error so that later calls do not report it
    return nullptr;
  }
  ZRUN_CUDA_CHECK(err);
  return static_cast<std::byte*>(p);
}

void CudaMemoryBackend::release(std::byte* base) {
  if (tier_ == zsim::Tier::gpu) ZRUN_CUDA_CHECK(cudaFree(base));
  else ZRUN_CUDA_CHECK(cudaFreeHost(base));
}

FenceId CudaMemoryBackend::record_fence(StreamHandle stream) {
  cudaEvent_t e = nullptr;
  if (spare_.empty()) {
    ZRUN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  } else {
    e = spare_.back();
    spare_.pop_back();
  }
  ZRUN_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(stream)));
  events_[next_] = e;
  return next_++;
}

cudaEvent_t CudaMemoryBackend::event(FenceId fence) const {
  const auto it = events_.find(fence);
  if (it == events_.end()) throw std::logic_error("CudaMemoryBackend: unknown fence");
  return it->second;
}

bool CudaMemoryBackend::fence_done(FenceId fence) {
  const cudaError_t err = cudaEventQuery(event(fence));
  if (err == cudaErrorNotReady) return false;
  ZRUN_CUDA_CHECK(err);
  retire(fence);
  return true;
}

void CudaMemoryBackend::wait_fence(FenceId fence) {
  ZRUN_CUDA_CHECK(cudaEventSynchronize(event(fence)));
  retire(fence);
}

void CudaMemoryBackend::retire(FenceId fence) {
  const auto it = events_.find(fence);
  spare_.push_back(it->second);
  events_.erase(it);
}

}  // namespace zrun
