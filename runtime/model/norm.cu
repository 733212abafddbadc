// LayerNorm (GPT-style, with bias) and RMSNorm (Llama-style): forward per row, backward as a row pass for
// the input gradient and deterministic column partial sums for the weight (and bias) gradients.
#include "runtime/model/device_types.cuh"
#include "runtime/model/layers.hpp"

namespace zrun::model {

namespace {
int norm_threads(std::int64_t h) { return h >= 1024 ? 256 : 128; }

template <class T>
__global__ void norm_fwd(bool layernorm, const T* x, const T* w, const T* b, T* y, float* stats, std::int64_t rows,
                         std::int64_t h, float eps) {
  const std::int64_t r = blockIdx.x;
  const T* xr = x + r * h;
  float mean = 0.0f;
  if (layernorm) {
    float s = 0.0f;
    for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) s += to_f(xr[c]);
    mean = block_sum(s) / h;
  }
  float s2 = 0.0f;
  for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float d = to_f(xr[c]) - mean;
    s2 += d * d;
  }
  const float rstd = rsqrtf(block_sum(s2) / h + eps);
  T* yr = y + r * h;
  for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    float v = (to_f(xr[c]) - mean) * rstd * to_f(w[c]);
    if (b) v += to_f(b[c]);
    yr[c] = from_f<T>(v);
  }
  if (threadIdx.x == 0) {
    stats[r] = mean;
    stats[rows + r] = rstd;
  }
}

template <class T>
__global__ void norm_bwd_dx(bool layernorm, const T* x, const T* w, const float* stats, const T* dy, T* dx,
                            bool accumulate, std::int64_t rows, std::int64_t h) {
  const std::int64_t r = blockIdx.x;
  const float mean = stats[r], rstd = stats[rows + r];
  const T* xr = x + r * h;
  const T* dyr = dy + r * h;
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = to_f(dyr[c]) * to_f(w[c]);
    const float xhat = (to_f(xr[c]) - mean) * rstd;
    sum_g += g;
    sum_gx += g * xhat;
  }
  const float mean_g = layernorm ? block_sum(sum_g) / h : 0.0f;
  const float mean_gx = block_sum(sum_gx) / h;
  T* dxr = dx + r * h;
  for (std::int64_t c = threadIdx.x; c < h; c += blockDim.x) {
    const float g = to_f(dyr[c]) * to_f(w[c]);
    const float xhat = (to_f(xr[c]) - mean) * rstd;
    float v = rstd * (g - mean_g - xhat * mean_gx);
    if (accumulate) v += to_f(dxr[c]);
    dxr[c] = from_f<T>(v);
  }
}

// Partial sums over a chunk of rows of dy * xhat (-> pw) and dy (-> pb, when pb).
template <class T>
__global__ void norm_bwd_partial(const T* x, const float* stats, const T* dy, float* pw, float* pb, std::int64_t rows,
                                 std::int64_t h, std::int64_t rows_per_part) {
  __shared__ float aw[8][33], ab[8][33];
  const std::int64_t c = blockIdx.x * 32 + threadIdx.x;
  const std::int64_t r0 = blockIdx.y * rows_per_part, r1 = min(rows, r0 + rows_per_part);
  float vw = 0.0f, vb = 0.0f;
  if (c < h)
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += 8) {
      const float d = to_f(dy[r * h + c]);
      vw += d * (to_f(x[r * h + c]) - stats[r]) * stats[rows + r];
      vb += d;
    }
  aw[threadIdx.y][threadIdx.x] = vw;
  ab[threadIdx.y][threadIdx.x] = vb;
  __syncthreads();
  if (threadIdx.y == 0 && c < h) {
    float sw = 0.0f, sb = 0.0f;
    for (int y = 0; y < 8; ++y) sw += aw[y][threadIdx.x], sb += ab[y][threadIdx.x];
    pw[blockIdx.y * h + c] = sw;
    if (pb) pb[blockIdx.y * h + c] = sb;
  }
}
}  // namespace

void norm_forward(DType dt, bool layernorm, const void* x, const void* w, const void* b, void* y, float* stats,
                  std::int64_t rows, std::int64_t h, float eps, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    norm_fwd<T><<<static_cast<unsigned>(rows), norm_threads(h), 0, s>>>(
        layernorm, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(b), static_cast<T*>(y),
        stats, rows, h, eps);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void norm_backward(DType dt, bool layernorm, const void* x, const void* w, const float* stats, const void* dy,
                   void* dx, bool accumulate_dx, void* dw, void* db, std::int64_t rows, std::int64_t h,
                   float* scratch, cudaStream_t s) {
  const std::int64_t per = column_partial_rows(rows), parts = (rows + per - 1) / per;
  float* pw = scratch;
  float* pb = layernorm && db ? scratch + parts * h : nullptr;
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    norm_bwd_dx<T><<<static_cast<unsigned>(rows), norm_threads(h), 0, s>>>(
        layernorm, static_cast<const T*>(x), static_cast<const T*>(w), stats, static_cast<const T*>(dy),
        static_cast<T*>(dx), accumulate_dx, rows, h);
    const dim3 grid(grid_for(h, 32), static_cast<unsigned>(parts));
    norm_bwd_partial<T><<<grid, dim3(32, 8), 0, s>>>(static_cast<const T*>(x), stats, static_cast<const T*>(dy), pw,
                                                     pb, rows, h, per);
  });
  ZK_CUDA_CHECK_LAUNCH();
  add_column_partials(dt, pw, parts, h, dw, s);
  if (pb) add_column_partials(dt, pb, parts, h, db, s);
}

}  // namespace zrun::model
