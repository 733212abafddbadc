// What the arena needs from "device memory": reserve and release big blocks, and fences that mark the
// work queued so far on a stream. CUDA provides it on the GPU machine (cuda_memory_backend.hpp:
// cudaMalloc / cudaHostAlloc and CUDA events); host tests provide a fake, so the arena's allocation and
// accounting run in CI without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>

#include "sim/common/units.hpp"

namespace zrun {

using FenceId = std::uint64_t;   // 0 = no fence
using StreamHandle = void*;      // a cudaStream_t in production; nullptr = the default stream

class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  virtual std::byte* reserve(zsim::Bytes bytes) = 0;  // nullptr when there is no room
  virtual void release(std::byte* base) = 0;
  virtual FenceId record_fence(StreamHandle stream) = 0;  // completes when the stream's queued work has
  virtual bool fence_done(FenceId fence) = 0;             // non-blocking query
  virtual void wait_fence(FenceId fence) = 0;             // host blocks until done; then it may be forgotten
};

}  // namespace zrun
