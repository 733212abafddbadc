#include "runtime/exec/batched_copy.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "runtime/comm/check.hpp"

namespace zrun {
namespace {

// The batch travels by value as the kernel's parameter (3 KiB, under the 4 KiB limit), as torch.cat's metadata does.
struct Batch {
  CopyPiece piece[kBatchedCopyMaxPieces];
};

// Bytes [first, first + count) of a piece in words of W bytes: src and dst are both W-aligned there.
template <class Word>
__device__ void copy_words(const char* src, char* dst, std::int64_t words, std::int64_t first, std::int64_t stride) {
  const Word* s = reinterpret_cast<const Word*>(src);
  Word* d = reinterpret_cast<Word*>(dst);
  for (std::int64_t i = first; i < words; i += stride) d[i] = s[i];
}

// Block row y copies piece y: a head byte by byte up to the widest alignment src and dst share (16, 8, 4, 2 or 1
// bytes), the body in words of it, the tail byte by byte. Blocks of a row stride over the piece.
__global__ void batched_copy_kernel(Batch b) {
  const CopyPiece p = b.piece[blockIdx.y];
  const char* src = static_cast<const char*>(p.src);
  char* dst = static_cast<char*>(p.dst);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uintptr_t skew = reinterpret_cast<std::uintptr_t>(src) ^ reinterpret_cast<std::uintptr_t>(dst);
  const int width = (skew & 15) == 0 ? 16 : (skew & 7) == 0 ? 8 : (skew & 3) == 0 ? 4 : (skew & 1) == 0 ? 2 : 1;
  const std::int64_t to_align = static_cast<std::int64_t>((width - reinterpret_cast<std::uintptr_t>(src) % width) % width);
  const std::int64_t head = to_align < p.bytes ? to_align : p.bytes;
  for (std::int64_t i = first; i < head; i += stride) dst[i] = src[i];
  const std::int64_t words = (p.bytes - head) / width, body = words * width;
  switch (width) {
    case 16: copy_words<uint4>(src + head, dst + head, words, first, stride); break;
    case 8: copy_words<uint2>(src + head, dst + head, words, first, stride); break;
    case 4: copy_words<unsigned>(src + head, dst + head, words, first, stride); break;
    case 2: copy_words<unsigned short>(src + head, dst + head, words, first, stride); break;
    default: copy_words<unsigned char>(src + head, dst + head, words, first, stride); break;
  }
  for (std::int64_t i = head + body + first; i < p.bytes; i += stride) dst[i] = src[i];
}

}  // namespace

void batched_copy(const CopyPiece* pieces, int n, cudaStream_t stream) {
  if (n < 0 || n > kBatchedCopyMaxPieces)
    throw std::invalid_argument("batched_copy: " + std::to_string(n) + " pieces (at most " +
                                std::to_string(kBatchedCopyMaxPieces) + ")");
  if (n == 0) return;
  Batch b;
  std::int64_t largest = 0;
  for (int i = 0; i < n; ++i) {
    b.piece[i] = pieces[i];
    largest = std::max(largest, pieces[i].bytes);
  }
  if (largest == 0) return;
  // Enough blocks for the largest piece at 16 bytes x 4 per thread, the whole grid held to ~16k blocks.
  const int threads = 256;
  const std::int64_t want = (largest + threads * 64 - 1) / (threads * 64);
  const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>(want, 1, std::max(1, 16384 / n)));
  batched_copy_kernel<<<dim3(blocks, static_cast<unsigned>(n)), threads, 0, stream>>>(b);
  ZRUN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zrun
