// One kernel launch that copies a batch of contiguous byte ranges on the GPU, as PyTorch's torch.cat does
// (CatArrayBatchedCopy: up to 128 inputs a launch). The executor runs a d2d copy of many pieces this way where
// the schedule gives it fewer kernels than pieces (CopyOp::kernel_launches). Launcher API; kernel in batched_copy.cu.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace zrun {

struct CopyPiece {
  const void* src = nullptr;
  void* dst = nullptr;
  std::int64_t bytes = 0;
};

inline constexpr int kBatchedCopyMaxPieces = 128;

// Copies pieces[0..n) (n <= kBatchedCopyMaxPieces; ranges must not overlap) in one kernel on `stream`; n == 0 does
// nothing. Throws std::invalid_argument when n is out of range.
void batched_copy(const CopyPiece* pieces, int n, cudaStream_t stream);

}  // namespace zrun
