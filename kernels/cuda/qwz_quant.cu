// qwZ block int8 quantize / dequantize kernels and their launchers (API in kernels/qwz_quant.hpp).
#include "kernels/qwz_quant.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_vec.cuh"
#include "kernels/cuda/quant_bits.cuh"
#include "kernels/cuda/launch_util.hpp"

namespace zk {
namespace {

constexpr int kInt8Max = 127;

// V values at src[i..], fewer (rest zero) where the block ends inside the vector (last block only).
template <class T, int V>
__device__ __forceinline__ void load_partial(const T* src, int64_t i, int64_t len, float (&x)[V]) {
  if (i + V <= len) {
    dev::load_f<T, V>(src + i, x);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) x[j] = i + j < len ? dev::to_f<T>(src[i + j]) : 0.0f;
  }
}

template <int V>
__device__ __forceinline__ void quantize_store_partial(const float (&x)[V], float inv, int8_t* dst, int64_t i, int64_t len) {
  dev::Vec<int8_t, V> out;
#pragma unroll
  for (int j = 0; j < V; ++j) out.v[j] = static_cast<int8_t>(dev::quant_sym(x[j], inv, kInt8Max));
  if (i + V <= len) {
    *reinterpret_cast<dev::Vec<int8_t, V>*>(dst + i) = out;
  } else {
    for (int j = 0; j < V && i + j < len; ++j) dst[i + j] = out.v[j];
  }
}

// One thread block per quantization block. Each thread keeps R vectors of V values in registers
// between the absmax pass and the write pass; past R * blockDim * V the write pass re-reads (L1/L2).
template <class T, int V, int R>
__global__ void qwz_quant_kernel(const T* __restrict__ in, int64_t n, int64_t block, int8_t* __restrict__ q,
                                 float* __restrict__ steps) {
  const int64_t start = static_cast<int64_t>(blockIdx.x) * block;
  const int64_t len = min(block, n - start);
  const T* src = in + start;
  int8_t* dst = q + start;
  const int64_t i0 = static_cast<int64_t>(threadIdx.x) * V, stride = static_cast<int64_t>(blockDim.x) * V;
  float x[R][V];
  float amax = 0.0f;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r * stride;
    if (i < len) {
      load_partial<T, V>(src, i, len, x[r]);
#pragma unroll
      for (int j = 0; j < V; ++j) amax = fmaxf(amax, fabsf(x[r][j]));
    }
  }
  for (int64_t i = i0 + R * stride; i < len; i += stride) {
    float xo[V];
    load_partial<T, V>(src, i, len, xo);
#pragma unroll
    for (int j = 0; j < V; ++j) amax = fmaxf(amax, fabsf(xo[j]));
  }
  amax = dev::block_max(amax);
  const float inv = amax > 0.0f ? kInt8Max / amax : 0.0f;
  if (threadIdx.x == 0) steps[blockIdx.x] = amax / kInt8Max;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r * stride;
    if (i < len) quantize_store_partial<V>(x[r], inv, dst, i, len);
  }
  for (int64_t i = i0 + R * stride; i < len; i += stride) {
    float xo[V];
    load_partial<T, V>(src, i, len, xo);
    quantize_store_partial<V>(xo, inv, dst, i, len);
  }
}

// One warp per quantization block (block % 8 == 0). Each lane issues its R 16-byte loads (R * 256
// elements per warp) before using any, keeps them raw, takes the absmax on packed pairs and by
// shuffles (no shared memory, no barrier), then quantizes from registers; past R * 256 elements the
// rest is re-read (L1/L2) in the write pass. Output: 8 bytes per vector, streaming stores.
constexpr int kWarpKernelThreads = 256;

template <class T>
__device__ __forceinline__ void quantize_store_raw8(const uint4& x, float inv, int8_t* dst, int64_t i, int64_t len) {
  float f[8];
  dev::raw8_to_f<T>(x, f);
  uint32_t b[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) b[j] = dev::quant_int8_bits(f[j], inv);
  const uint2 out = make_uint2(dev::pack_low_bytes(b[0], b[1], b[2], b[3]), dev::pack_low_bytes(b[4], b[5], b[6], b[7]));
  if (i + 8 <= len) {
    __stcs(reinterpret_cast<uint2*>(dst + i), out);
  } else {
    const uint32_t w[2] = {out.x, out.y};
    for (int j = 0; j < 8 && i + j < len; ++j) dst[i + j] = static_cast<int8_t>(w[j / 4] >> (8 * (j % 4)));
  }
}

template <class T, int R>
__global__ void __launch_bounds__(kWarpKernelThreads) qwz_quant_warp_kernel(const T* __restrict__ in, int64_t n,
                                                                            int64_t block, int64_t nb,
                                                                            int8_t* __restrict__ q,
                                                                            float* __restrict__ steps) {
  using P2 = typename dev::Pair2<T>::type;
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (w >= nb) return;  // whole warps only
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t start = w * block;
  const int64_t len = min(block, n - start);
  const T* src = in + start;
  int8_t* dst = q + start;
  constexpr int64_t kStride = 32 * 8;
  uint4 x[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = r * kStride + lane * 8;
    x[r] = i < len ? dev::load_raw8<T>(src, i, len) : make_uint4(0, 0, 0, 0);
  }
  P2 m2 = *reinterpret_cast<const P2*>(&x[0].x);  // any element's pair; zeros for an idle lane
  m2 = __habs2(m2);
#pragma unroll
  for (int r = 0; r < R; ++r) m2 = dev::absmax_raw8<T>(m2, x[r]);
  for (int64_t i = R * kStride + lane * 8; i < len; i += kStride) m2 = dev::absmax_raw8<T>(m2, dev::load_raw8<T>(src, i, len));
  const float amax = dev::warp_max(dev::pair_max<T>(m2));
  const float inv = amax > 0.0f ? kInt8Max / amax : 0.0f;
  if (lane == 0) steps[w] = amax / kInt8Max;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = r * kStride + lane * 8;
    if (i < len) quantize_store_raw8<T>(x[r], inv, dst, i, len);
  }
  for (int64_t i = R * kStride + lane * 8; i < len; i += kStride)
    quantize_store_raw8<T>(dev::load_raw8<T>(src, i, len), inv, dst, i, len);
}

template <class T, int R>
void launch_quant_warp(const T* src, int64_t n, int64_t block, int8_t* q, float* steps, cudaStream_t st) {
  const int64_t nb = qwz_num_blocks(n, block);
  const int64_t grid = detail::ceil_div(nb, kWarpKernelThreads / 32);
  qwz_quant_warp_kernel<T, R><<<static_cast<unsigned>(grid), kWarpKernelThreads, 0, st>>>(src, n, block, nb, q, steps);
}

// One thread per V elements; a vector never crosses a block (block % V == 0 for V > 1).
template <class T, int V>
__global__ void qwz_dequant_kernel(const int8_t* __restrict__ q, const float* __restrict__ steps, int64_t n,
                                   int64_t block, T* __restrict__ out) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i >= n) return;
  if (i + V <= n) {
    const float step = __ldg(steps + i / block);
    const dev::Vec<int8_t, V> x = *reinterpret_cast<const dev::Vec<int8_t, V>*>(q + i);
    float y[V];
#pragma unroll
    for (int j = 0; j < V; ++j) y[j] = static_cast<float>(x.v[j]) * step;
    dev::store_f<T, V>(out + i, y);
  } else {
    for (int64_t j = i; j < n; ++j) out[j] = dev::from_f<T>(static_cast<float>(q[j]) * __ldg(steps + j / block));
  }
}

template <class T>
void quantize_typed(const void* in, int64_t n, int64_t block, int8_t* q, float* steps, cudaStream_t st) {
  const auto* src = static_cast<const T*>(in);
  const int64_t nb = qwz_num_blocks(n, block);
  if (block % 8 == 0 && block >= 256 && detail::aligned(in, 16) && detail::aligned(q, 8)) {
    // Registers per lane: enough 16-byte vectors to hold the block (R * 256 >= block), at most 16.
    if (block <= 256) launch_quant_warp<T, 1>(src, n, block, q, steps, st);
    else if (block <= 512) launch_quant_warp<T, 2>(src, n, block, q, steps, st);
    else if (block <= 1024) launch_quant_warp<T, 4>(src, n, block, q, steps, st);
    else if (block <= 2048) launch_quant_warp<T, 8>(src, n, block, q, steps, st);
    else launch_quant_warp<T, 16>(src, n, block, q, steps, st);
  } else if (block % 8 == 0 && detail::aligned(in, 16) && detail::aligned(q, 8)) {
    qwz_quant_kernel<T, 8, 4><<<static_cast<unsigned>(nb), detail::group_threads(block, 8 * 4), 0, st>>>(src, n, block, q, steps);
  } else {
    qwz_quant_kernel<T, 1, 4><<<static_cast<unsigned>(nb), detail::group_threads(block, 1 * 4), 0, st>>>(src, n, block, q, steps);
  }
  ZK_CUDA_CHECK_LAUNCH();
}

template <class T>
void dequantize_typed(const int8_t* q, const float* steps, int64_t n, int64_t block, void* out, cudaStream_t st) {
  auto* dst = static_cast<T*>(out);
  constexpr int kThreads = 256;
  if (block % 8 == 0 && detail::aligned(out, 16) && detail::aligned(q, 8)) {
    const int64_t grid = detail::ceil_div(detail::ceil_div(n, 8), kThreads);
    qwz_dequant_kernel<T, 8><<<static_cast<unsigned>(grid), kThreads, 0, st>>>(q, steps, n, block, dst);
  } else {
    const int64_t grid = detail::ceil_div(n, kThreads);
    qwz_dequant_kernel<T, 1><<<static_cast<unsigned>(grid), kThreads, 0, st>>>(q, steps, n, block, dst);
  }
  ZK_CUDA_CHECK_LAUNCH();
}

}  // namespace

void qwz_quantize(const void* in, Half16 fmt, int64_t n, int64_t block_elems, int8_t* q_out, float* steps_out,
                  StreamHandle stream) {
  detail::require(n >= 0 && block_elems >= 1, "qwz_quantize: need n >= 0 and block_elems >= 1");
  if (n == 0) return;
  if (fmt == Half16::bf16) quantize_typed<__nv_bfloat16>(in, n, block_elems, q_out, steps_out, detail::as_stream(stream));
  else quantize_typed<__half>(in, n, block_elems, q_out, steps_out, detail::as_stream(stream));
}

void qwz_dequantize(const int8_t* q, const float* steps, int64_t n, int64_t block_elems, void* out, Half16 fmt,
                    StreamHandle stream) {
  detail::require(n >= 0 && block_elems >= 1, "qwz_dequantize: need n >= 0 and block_elems >= 1");
  if (n == 0) return;
  if (fmt == Half16::bf16) dequantize_typed<__nv_bfloat16>(q, steps, n, block_elems, out, detail::as_stream(stream));
  else dequantize_typed<__half>(q, steps, n, block_elems, out, detail::as_stream(stream));
}

}  // namespace zk
