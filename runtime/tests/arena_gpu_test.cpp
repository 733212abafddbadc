// On the GPU machine: the arena over cudaMalloc and cudaHostAlloc. Skips with a message where there is
// no GPU (CI).
#include <gtest/gtest.h>

#include "kernels/tests/gpu_test_util.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/memory/arena.hpp"
#include "runtime/memory/cuda_memory_backend.hpp"

namespace zrun {
namespace {

using zsim::MemCategory;
using zsim::Tier;

TEST(ArenaGpu, BuffersOnCudaMallocHoldDataAndAreReusedAfterTheStreamPasses) {
  ZK_REQUIRE_GPU();
  CudaMemoryBackend dev(Tier::gpu);
  MemoryAccounting acc;
  cudaStream_t stream;
  ZRUN_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    Arena arena(Tier::gpu, 64 << 20, dev, 0, acc);
    std::byte* a = arena.alloc("a", MemCategory::activations, "", 32 << 20, "fwd");
    ZRUN_CUDA_CHECK(cudaMemsetAsync(a, 0x5a, 32 << 20, stream));
    std::vector<unsigned char> back(32 << 20);
    ZRUN_CUDA_CHECK(cudaMemcpyAsync(back.data(), a, back.size(), cudaMemcpyDeviceToHost, stream));
    arena.free("a", stream);
    std::byte* b = arena.alloc("b", MemCategory::activations, "", 48 << 20, "fwd");  // needs a's range
    EXPECT_EQ(b, a);
    EXPECT_EQ(back[12345], 0x5a);  // the allocation waited for the copy
    EXPECT_EQ(acc.tier(Tier::gpu).peak, 48 << 20);
    arena.free("b", stream);
  }
  ZRUN_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(ArenaGpu, PinnedHostTierOnCudaHostAlloc) {
  ZK_REQUIRE_GPU();
  CudaMemoryBackend host(Tier::cpu);
  MemoryAccounting acc;
  Arena arena(Tier::cpu, 1 << 20, host, 0, acc);
  std::byte* p = arena.alloc("m", MemCategory::optimizer, "", 4096, "init");
  p[4095] = std::byte{7};  // host memory: directly writable
  cudaPointerAttributes attr;
  ZRUN_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  EXPECT_EQ(acc.tier(Tier::cpu).live, 4096);
  arena.free("m");
}

TEST(ArenaGpu, AnArenaLargerThanTheGpuIsAnOutOfMemoryError) {
  ZK_REQUIRE_GPU();
  CudaMemoryBackend dev(Tier::gpu);
  MemoryAccounting acc;
  EXPECT_THROW(Arena(Tier::gpu, Bytes{1} << 50, dev, 0, acc), ArenaOutOfMemory);
  void* p = nullptr;
  ZRUN_CUDA_CHECK(cudaMalloc(&p, 256));  // the failed reservation left no sticky error behind
  ZRUN_CUDA_CHECK(cudaFree(p));
}

}  // namespace
}  // namespace zrun
