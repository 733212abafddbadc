// Column reductions over [rows, cols] matrices, deterministic (no atomics): partial sums per chunk of rows
// into fp32 scratch, then one pass adding them into a gradient. Used by bias gradients (and by norm.cu).
#include "runtime/model/device_types.cuh"
#include "runtime/model/layers.hpp"

namespace zrun::model {

namespace {
constexpr std::int64_t kMaxParts = 64;
constexpr std::int64_t kRowsPerPartMin = 64;

template <class T>
__global__ void colsum_partial(const T* x, float* partials, std::int64_t rows, std::int64_t cols,
                               std::int64_t rows_per_part) {
  __shared__ float acc[8][33];
  const std::int64_t c = blockIdx.x * 32 + threadIdx.x;
  const std::int64_t r0 = blockIdx.y * rows_per_part, r1 = min(rows, r0 + rows_per_part);
  float v = 0.0f;
  if (c < cols)
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += 8) v += to_f(x[r * cols + c]);
  acc[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float sum = 0.0f;
    for (int y = 0; y < 8; ++y) sum += acc[y][threadIdx.x];
    partials[blockIdx.y * cols + c] = sum;
  }
}

template <class T>
__global__ void add_partials(const float* partials, std::int64_t parts, std::int64_t cols, T* dst) {
  const std::int64_t c = blockIdx.x * (std::int64_t)blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float v = to_f(dst[c]);
  for (std::int64_t p = 0; p < parts; ++p) v += partials[p * cols + c];
  dst[c] = from_f<T>(v);
}
}  // namespace

std::int64_t column_partial_rows(std::int64_t rows) {
  const std::int64_t parts = std::min(kMaxParts, std::max<std::int64_t>(1, rows / kRowsPerPartMin));
  return (rows + parts - 1) / parts;
}

std::int64_t column_partials_floats(std::int64_t rows, std::int64_t cols) {
  const std::int64_t per = column_partial_rows(rows);
  return (rows + per - 1) / per * cols;
}

void add_column_partials(DType dt, const float* partials, std::int64_t parts, std::int64_t cols, void* dst,
                         cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    add_partials<T><<<grid_for(cols, 256), 256, 0, s>>>(partials, parts, cols, static_cast<T*>(dst));
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void bias_backward(DType dt, const void* dy, void* dbias, std::int64_t rows, std::int64_t cols, float* scratch,
                   cudaStream_t s) {
  const std::int64_t per = column_partial_rows(rows), parts = (rows + per - 1) / per;
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    const dim3 grid(grid_for(cols, 32), static_cast<unsigned>(parts));
    colsum_partial<T><<<grid, dim3(32, 8), 0, s>>>(static_cast<const T*>(dy), scratch, rows, cols, per);
  });
  ZK_CUDA_CHECK_LAUNCH();
  add_column_partials(dt, scratch, parts, cols, dbias, s);
}

}  // namespace zrun::model
