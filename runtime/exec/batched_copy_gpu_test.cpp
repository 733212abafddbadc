// On the GPU machine: batched_copy copies every piece of a batch byte for byte, whatever the pieces' lengths and
// their source and destination alignments (the 16-, 8-, 4-, 2- and 1-byte paths, heads and tails), leaves the bytes
// between pieces alone, and refuses more pieces than a launch holds. Skips with a message where there is no GPU (CI).
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/tests/gpu_test_util.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/exec/batched_copy.hpp"

namespace zrun {
namespace {

struct DeviceBytes {
  std::uint8_t* p = nullptr;
  explicit DeviceBytes(std::size_t n) { ZRUN_CUDA_CHECK(cudaMalloc(&p, n)); }
  ~DeviceBytes() { cudaFree(p); }
};

TEST(BatchedCopyGpu, CopiesEveryPieceExactlyAtEveryLengthAndAlignment) {
  ZK_REQUIRE_GPU();
  // 128 pieces: lengths from 0 to past a few blocks' stride, source and destination offsets mod 16 varied apart.
  const int n = kBatchedCopyMaxPieces;
  const std::int64_t lengths[] = {0, 1, 2, 3, 15, 16, 17, 255, 4096, 70001, 1 << 20};
  std::vector<std::int64_t> src_at(n), dst_at(n), len(n);
  std::int64_t src_bytes = 0, dst_bytes = 0;
  for (int i = 0; i < n; ++i) {
    len[i] = lengths[i % 11];
    src_at[i] = src_bytes + i % 16;
    dst_at[i] = dst_bytes + (i * 7) % 16;
    src_bytes = src_at[i] + len[i] + 32;
    dst_bytes = dst_at[i] + len[i] + 32;
  }
  std::vector<std::uint8_t> src(src_bytes), expect(dst_bytes, 0xA5);
  for (std::int64_t i = 0; i < src_bytes; ++i) src[i] = static_cast<std::uint8_t>((i * 131 + 7) % 251);
  for (int i = 0; i < n; ++i)
    for (std::int64_t b = 0; b < len[i]; ++b) expect[dst_at[i] + b] = src[src_at[i] + b];
  DeviceBytes d_src(src_bytes), d_dst(dst_bytes);
  ZRUN_CUDA_CHECK(cudaMemcpy(d_src.p, src.data(), src_bytes, cudaMemcpyHostToDevice));
  ZRUN_CUDA_CHECK(cudaMemset(d_dst.p, 0xA5, dst_bytes));
  std::vector<CopyPiece> pieces(n);
  for (int i = 0; i < n; ++i) pieces[i] = {d_src.p + src_at[i], d_dst.p + dst_at[i], len[i]};
  batched_copy(pieces.data(), n, nullptr);
  std::vector<std::uint8_t> got(dst_bytes);
  ZRUN_CUDA_CHECK(cudaMemcpy(got.data(), d_dst.p, dst_bytes, cudaMemcpyDeviceToHost));
  for (std::int64_t i = 0; i < dst_bytes; ++i) ASSERT_EQ(got[i], expect[i]) << "byte " << i;
}

TEST(BatchedCopyGpu, RefusesMorePiecesThanOneLaunchHolds) {
  ZK_REQUIRE_GPU();
  std::vector<CopyPiece> pieces(kBatchedCopyMaxPieces + 1);
  EXPECT_THROW(batched_copy(pieces.data(), kBatchedCopyMaxPieces + 1, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace zrun
