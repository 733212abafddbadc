// Token embedding (+ learned absolute positions): forward gather; backward adds each token's output
// gradient to its table row deterministically: the positions are sorted by token id (stable radix sort),
// and each run of equal ids is summed in fp32 in position order and added to the row once.
#include <cub/device/device_radix_sort.cuh>

#include "runtime/model/device_types.cuh"
#include "runtime/model/layers.hpp"

namespace zrun::model {

namespace {
template <class T>
__global__ void embed_fwd(const std::int32_t* tok, const T* table, const T* pos, T* out, std::int64_t n,
                          std::int64_t seq, std::int64_t h) {
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n;
       i += (std::int64_t)gridDim.x * blockDim.x) {
    const std::int64_t t = i / h, c = i % h;
    float v = to_f(table[(std::int64_t)tok[t] * h + c]);
    if (pos) v += to_f(pos[(t % seq) * h + c]);
    out[i] = from_f<T>(v);
  }
}

__global__ void iota(std::int32_t* v, std::int64_t n) {
  const std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x;
  if (i < n) v[i] = static_cast<std::int32_t>(i);
}

// One block per sorted position; the block at the start of a run of equal token ids sums the run.
template <class T>
__global__ void embed_bwd_runs(const std::int32_t* ids, const std::int32_t* pos, const T* dout, T* dtable,
                               std::int64_t n, std::int64_t h) {
  const std::int64_t i = blockIdx.x;
  const std::int32_t id = ids[i];
  if (i > 0 && ids[i - 1] == id) return;
  for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float acc = 0.0f;
    for (std::int64_t j = i; j < n && ids[j] == id; ++j) acc += to_f(dout[(std::int64_t)pos[j] * h + c]);
    T* dst = dtable + (std::int64_t)id * h + c;
    *dst = from_f<T>(to_f(*dst) + acc);
  }
}

// Scratch: sorted ids, positions in, positions out (T int32 each, 256-aligned), then CUB's temporary storage.
std::int64_t ids_bytes(std::int64_t tokens) { return (tokens * 4 + 255) / 256 * 256; }
std::size_t cub_temp_bytes(std::int64_t tokens) {
  std::size_t bytes = 0;
  ZK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                                static_cast<std::int32_t*>(nullptr),
                                                static_cast<const std::int32_t*>(nullptr),
                                                static_cast<std::int32_t*>(nullptr), static_cast<int>(tokens)));
  return bytes;
}

template <class T>
__global__ void embed_bwd_pos(const T* dout, T* dpos, std::int64_t batch, std::int64_t seq, std::int64_t h) {
  const std::int64_t n = seq * h;
  for (std::int64_t i = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x; i < n;
       i += (std::int64_t)gridDim.x * blockDim.x) {
    float acc = to_f(dpos[i]);
    for (std::int64_t b = 0; b < batch; ++b) acc += to_f(dout[b * n + i]);
    dpos[i] = from_f<T>(acc);
  }
}

unsigned blocks(std::int64_t n) { return std::min<std::int64_t>(grid_for(n, 256), 65535 * 8); }
}  // namespace

void embedding_forward(DType dt, const std::int32_t* tok, const void* table, const void* positions, void* out,
                       std::int64_t tokens, std::int64_t seq, std::int64_t h, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    const std::int64_t n = tokens * h;
    embed_fwd<T><<<blocks(n), 256, 0, s>>>(tok, static_cast<const T*>(table), static_cast<const T*>(positions),
                                            static_cast<T*>(out), n, seq, h);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

std::int64_t embedding_backward_scratch_bytes(std::int64_t tokens) {
  return 3 * ids_bytes(tokens) + static_cast<std::int64_t>(cub_temp_bytes(tokens));
}

void embedding_backward(DType dt, const std::int32_t* tok, const void* dout, void* d_table, void* d_positions,
                        std::int64_t tokens, std::int64_t seq, std::int64_t h, void* scratch, cudaStream_t s) {
  char* base = static_cast<char*>(scratch);
  auto* ids = reinterpret_cast<std::int32_t*>(base);
  auto* pos_in = reinterpret_cast<std::int32_t*>(base + ids_bytes(tokens));
  auto* pos = reinterpret_cast<std::int32_t*>(base + 2 * ids_bytes(tokens));
  std::size_t temp_bytes = cub_temp_bytes(tokens);
  iota<<<grid_for(tokens, 256), 256, 0, s>>>(pos_in, tokens);
  ZK_CUDA_CHECK_LAUNCH();
  ZK_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + 3 * ids_bytes(tokens), temp_bytes, tok, ids, pos_in, pos,
                                                static_cast<int>(tokens), 0, 32, s));
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    embed_bwd_runs<T><<<static_cast<unsigned>(tokens), h >= 512 ? 256 : 64, 0, s>>>(
        ids, pos, static_cast<const T*>(dout), static_cast<T*>(d_table), tokens, h);
    if (d_positions)
      embed_bwd_pos<T><<<blocks(seq * h), 256, 0, s>>>(static_cast<const T*>(dout), static_cast<T*>(d_positions),
                                                       tokens / seq, seq, h);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

}  // namespace zrun::model
