// qgZ int4 kernels: swizzled quantize (optionally with LoCo), dequant-reduce-requant (optionally with
// LoCo) and the final dequant-reduce. API and layout in kernels/qgz_quant.hpp.
#include "kernels/qgz_quant.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_vec.cuh"
#include "kernels/cuda/launch_util.hpp"

namespace zk {
namespace {

// LoCo arguments as the kernels see them (err_beta and whether this step resets the error).
struct LocoArgs {
  float beta;
  bool reset;
};

// grid = (blocks_per_partition, world): one thread block per (partition p, block b).
// Input offset p*P + b*block; output slot s = swizzle(p): bytes s*P/2 + b*block/2, step s*nb + b.
// LOCO: c = g + e (e = 0 at a reset); e <- beta*e + (1-beta)*(c - deQ(Q(c))), e in input order.
// Each thread holds R vectors of V elements in registers between the absmax pass and the write pass;
// a block larger than R * blockDim * V re-reads the rest (an L1/L2 hit) in the write pass.
template <class T, int V, bool LOCO>
__device__ __forceinline__ void load_compensated(const T* grad, const T* err, LocoArgs loco, int64_t off, float (&x)[V],
                                                 float (&e)[V]) {
  dev::load_f<T, V>(grad + off, x);
  if constexpr (LOCO) {
    if (!loco.reset) {
      dev::load_f<T, V>(err + off, e);
    } else {
#pragma unroll
      for (int j = 0; j < V; ++j) e[j] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < V; ++j) x[j] += e[j];
  }
}

// Quantize V compensated values, store the nibbles, and (LOCO) store the updated error.
template <class T, int V, bool LOCO>
__device__ __forceinline__ void quantize_store(const float (&x)[V], float (&e)[V], float inv, float step, LocoArgs loco,
                                               uint8_t* dst, T* err_dst) {
  uint32_t nib[V];
  float qf[V];
#pragma unroll
  for (int j = 0; j < V; ++j) nib[j] = dev::quant_nibble(x[j], inv, qf[j]);
  dev::store_nibbles<V>(dst, nib);
  if constexpr (LOCO) {
#pragma unroll
    for (int j = 0; j < V; ++j) e[j] = loco.beta * e[j] + (1.0f - loco.beta) * (x[j] - qf[j] * step);
    dev::store_f<T, V>(err_dst, e);
  }
}

template <class T, int V, int R, bool LOCO>
__global__ void swizzled_quant_kernel(const T* __restrict__ grad, T* __restrict__ err, LocoArgs loco, int64_t P,
                                      int64_t block, int nodes, int dpn, uint8_t* __restrict__ q,
                                      float* __restrict__ steps) {
  const int64_t b = blockIdx.x, p = blockIdx.y, nb = gridDim.x;
  const int64_t start = b * block;
  const int64_t len = min(block, P - start);
  const int64_t in_off = p * P + start;
  const int64_t slot = (p % dpn) * nodes + p / dpn;
  const int64_t i0 = static_cast<int64_t>(threadIdx.x) * V, stride = static_cast<int64_t>(blockDim.x) * V;
  float x[R][V], e[R][V];
  float amax = 0.0f;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r * stride;
    if (i < len) {
      load_compensated<T, V, LOCO>(grad, err, loco, in_off + i, x[r], e[r]);
#pragma unroll
      for (int j = 0; j < V; ++j) amax = fmaxf(amax, fabsf(x[r][j]));
    }
  }
  for (int64_t i = i0 + R * stride; i < len; i += stride) {
    float xo[V], eo[V];
    load_compensated<T, V, LOCO>(grad, err, loco, in_off + i, xo, eo);
#pragma unroll
    for (int j = 0; j < V; ++j) amax = fmaxf(amax, fabsf(xo[j]));
  }
  amax = dev::block_max(amax);
  const float step = amax / kInt4Max;
  const float inv = amax > 0.0f ? kInt4Max / amax : 0.0f;
  if (threadIdx.x == 0) steps[slot * nb + b] = step;
  uint8_t* dst = q + slot * (P / 2) + start / 2;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r * stride;
    if (i < len) quantize_store<T, V, LOCO>(x[r], e[r], inv, step, loco, dst + i / 2, err + in_off + i);
  }
  for (int64_t i = i0 + R * stride; i < len; i += stride) {
    float xo[V], eo[V];
    load_compensated<T, V, LOCO>(grad, err, loco, in_off + i, xo, eo);
    quantize_store<T, V, LOCO>(xo, eo, inv, step, loco, dst + i / 2, err + in_off + i);
  }
}

// Sum over k chunks of deQ for V elements at element offset off of partition j, block b.
template <int V>
__device__ __forceinline__ void reduce_chunks(const uint8_t* __restrict__ q_in, const float* __restrict__ steps_in,
                                              int k, int m, int64_t P, int64_t nb, int64_t j, int64_t b, int64_t off,
                                              float (&acc)[V]) {
#pragma unroll
  for (int t = 0; t < V; ++t) acc[t] = 0.0f;
  const int64_t chunk_bytes = static_cast<int64_t>(m) * (P / 2);
  const uint8_t* src = q_in + j * (P / 2) + off / 2;
  const float* st = steps_in + j * nb + b;
#pragma unroll 8
  for (int c = 0; c < k; ++c) {
    float qf[V];
    dev::load_int4_f<V>(src + c * chunk_bytes, qf);
    const float s = __ldg(st + static_cast<int64_t>(c) * m * nb);
#pragma unroll
    for (int t = 0; t < V; ++t) acc[t] = fmaf(qf[t], s, acc[t]);
  }
}

template <class ET, int V, bool LOCO>
__device__ __forceinline__ void reduced_compensated(const uint8_t* q_in, const float* steps_in, int k, int m, int64_t P,
                                                    int64_t nb, int64_t j, int64_t b, int64_t off, const ET* err,
                                                    LocoArgs loco, float (&x)[V], float (&e)[V]) {
  reduce_chunks<V>(q_in, steps_in, k, m, P, nb, j, b, off, x);
  if constexpr (LOCO) {
    if (!loco.reset) {
      dev::load_f<ET, V>(err + j * P + off, e);
    } else {
#pragma unroll
      for (int t = 0; t < V; ++t) e[t] = 0.0f;
    }
#pragma unroll
    for (int t = 0; t < V; ++t) x[t] += e[t];
  }
}

// grid = (nb, m): one thread block per output (partition j, block b); sums held in registers (R
// vectors of V per thread), recomputed from the k chunks (L1/L2) only past R * blockDim * V.
template <class ET, int V, int R, bool LOCO>
__global__ void reduce_requant_kernel(const uint8_t* __restrict__ q_in, const float* __restrict__ steps_in, int k,
                                      int m, int64_t P, int64_t block, ET* __restrict__ err, LocoArgs loco,
                                      uint8_t* __restrict__ q_out, float* __restrict__ steps_out) {
  const int64_t b = blockIdx.x, j = blockIdx.y, nb = gridDim.x;
  const int64_t start = b * block;
  const int64_t len = min(block, P - start);
  const int64_t i0 = static_cast<int64_t>(threadIdx.x) * V, stride = static_cast<int64_t>(blockDim.x) * V;
  float x[R][V], e[R][V];
  float amax = 0.0f;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r * stride;
    if (i < len) {
      reduced_compensated<ET, V, LOCO>(q_in, steps_in, k, m, P, nb, j, b, start + i, err, loco, x[r], e[r]);
#pragma unroll
      for (int t = 0; t < V; ++t) amax = fmaxf(amax, fabsf(x[r][t]));
    }
  }
  for (int64_t i = i0 + R * stride; i < len; i += stride) {
    float xo[V], eo[V];
    reduced_compensated<ET, V, LOCO>(q_in, steps_in, k, m, P, nb, j, b, start + i, err, loco, xo, eo);
#pragma unroll
    for (int t = 0; t < V; ++t) amax = fmaxf(amax, fabsf(xo[t]));
  }
  amax = dev::block_max(amax);
  const float step = amax / kInt4Max;
  const float inv = amax > 0.0f ? kInt4Max / amax : 0.0f;
  if (threadIdx.x == 0) steps_out[j * nb + b] = step;
  uint8_t* dst = q_out + j * (P / 2) + start / 2;
  ET* err_base = err + j * P + start;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r * stride;
    if (i < len) quantize_store<ET, V, LOCO>(x[r], e[r], inv, step, loco, dst + i / 2, err_base + i);
  }
  for (int64_t i = i0 + R * stride; i < len; i += stride) {
    float xo[V], eo[V];
    reduced_compensated<ET, V, LOCO>(q_in, steps_in, k, m, P, nb, j, b, start + i, err, loco, xo, eo);
    quantize_store<ET, V, LOCO>(xo, eo, inv, step, loco, dst + i / 2, err_base + i);
  }
}

// One thread per V output elements of the single partition (m = 1 layout: chunk c at c*P/2 bytes).
template <class OT, int V>
__global__ void dequant_reduce_kernel(const uint8_t* __restrict__ q_in, const float* __restrict__ steps_in, int k,
                                      int64_t P, int64_t block, float out_scale, OT* __restrict__ out) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i >= P) return;
  const int64_t nb = (P + block - 1) / block;
  float acc[V];
  reduce_chunks<V>(q_in, steps_in, k, 1, P, nb, 0, i / block, i, acc);
#pragma unroll
  for (int t = 0; t < V; ++t) acc[t] *= out_scale;
  dev::store_f<OT, V>(out + i, acc);
}

template <class T, bool LOCO>
void swizzled_typed(const void* grad, void* err, LocoArgs loco, const QgzShape& s, uint8_t* q, float* steps,
                    cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(s.blocks_per_partition()), static_cast<unsigned>(s.world()));
  const auto* g = static_cast<const T*>(grad);
  auto* e = static_cast<T*>(err);
  const int64_t P = s.partition_elems();
  const bool vec8 = P % 8 == 0 && s.block_elems % 8 == 0 && detail::aligned(grad, 16) && detail::aligned(err, 16) &&
                    detail::aligned(q, 4);
  if (vec8) {
    swizzled_quant_kernel<T, 8, 4, LOCO><<<grid, detail::group_threads(s.block_elems, 8 * 4), 0, st>>>(
        g, e, loco, P, s.block_elems, s.nodes, s.devices_per_node, q, steps);
  } else {
    detail::require(detail::aligned(grad, 4) && detail::aligned(err, 4), "qgZ quantize: grad/err must be 4-byte aligned");
    swizzled_quant_kernel<T, 2, 4, LOCO><<<grid, detail::group_threads(s.block_elems, 2 * 4), 0, st>>>(
        g, e, loco, P, s.block_elems, s.nodes, s.devices_per_node, q, steps);
  }
  ZK_CUDA_CHECK_LAUNCH();
}

template <class ET, bool LOCO>
void reduce_requant_typed(const uint8_t* q_in, const float* steps_in, int k, int m, int64_t P, int64_t block,
                          void* err, LocoArgs loco, uint8_t* q_out, float* steps_out, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(P, block)), static_cast<unsigned>(m));
  auto* e = static_cast<ET*>(err);
  const bool vec32 = P % 32 == 0 && block % 32 == 0 && detail::aligned(q_in, 16) && detail::aligned(q_out, 16) &&
                     detail::aligned(err, 16);
  if (vec32) {
    reduce_requant_kernel<ET, 32, 1, LOCO><<<grid, detail::group_threads(block, 32), 0, st>>>(
        q_in, steps_in, k, m, P, block, e, loco, q_out, steps_out);
  } else {
    detail::require(detail::aligned(err, 4), "qgZ reduce-requant: err must be 4-byte aligned");
    reduce_requant_kernel<ET, 2, 4, LOCO><<<grid, detail::group_threads(block, 2 * 4), 0, st>>>(
        q_in, steps_in, k, m, P, block, e, loco, q_out, steps_out);
  }
  ZK_CUDA_CHECK_LAUNCH();
}

template <class OT>
void dequant_reduce_typed(const uint8_t* q_in, const float* steps_in, int k, int64_t P, int64_t block, float scale,
                          void* out, cudaStream_t st) {
  constexpr int kThreads = 256;
  auto* o = static_cast<OT*>(out);
  if (P % 32 == 0 && block % 32 == 0 && detail::aligned(q_in, 16) && detail::aligned(out, 16)) {
    const int64_t grid = detail::ceil_div(P / 32, kThreads);
    dequant_reduce_kernel<OT, 32><<<static_cast<unsigned>(grid), kThreads, 0, st>>>(q_in, steps_in, k, P, block, scale, o);
  } else {
    detail::require(detail::aligned(out, 2 * sizeof(OT)), "qgZ dequant-reduce: out must be aligned to 2 elements");
    const int64_t grid = detail::ceil_div(P / 2, kThreads);
    dequant_reduce_kernel<OT, 2><<<static_cast<unsigned>(grid), kThreads, 0, st>>>(q_in, steps_in, k, P, block, scale, o);
  }
  ZK_CUDA_CHECK_LAUNCH();
}

void check_reduce_args(int k, int m, int64_t P, int64_t block) {
  detail::require(k >= 1 && m >= 1, "qgZ reduce: need k >= 1 and m >= 1");
  detail::require(P > 0 && P % 2 == 0, "qgZ reduce: partition_elems must be positive and even");
  detail::require(block > 0 && block % 2 == 0, "qgZ reduce: block_elems must be positive and even");
  detail::require(m <= 65535, "qgZ reduce: m must be <= 65535");
}

}  // namespace

void qgz_swizzled_quantize(const void* grad, Half16 fmt, const QgzShape& s, uint8_t* q_out, float* steps_out,
                           StreamHandle stream) {
  detail::require(s.valid(), "qgz_swizzled_quantize: need n % (2*world) == 0, even block_elems");
  const LocoArgs none{0.0f, true};
  if (fmt == Half16::bf16) swizzled_typed<__nv_bfloat16, false>(grad, nullptr, none, s, q_out, steps_out, detail::as_stream(stream));
  else swizzled_typed<__half, false>(grad, nullptr, none, s, q_out, steps_out, detail::as_stream(stream));
}

void qgz_swizzled_quantize_loco(const void* grad, Half16 fmt, void* err, const LocoParams& loco, const QgzShape& s,
                                uint8_t* q_out, float* steps_out, StreamHandle stream) {
  detail::require(s.valid(), "qgz_swizzled_quantize_loco: need n % (2*world) == 0, even block_elems");
  const LocoArgs a{loco.err_beta, loco.resets_now()};
  if (fmt == Half16::bf16) swizzled_typed<__nv_bfloat16, true>(grad, err, a, s, q_out, steps_out, detail::as_stream(stream));
  else swizzled_typed<__half, true>(grad, err, a, s, q_out, steps_out, detail::as_stream(stream));
}

void qgz_dequant_reduce_requant(const uint8_t* q_in, const float* steps_in, int k, int m, int64_t partition_elems,
                                int64_t block_elems, uint8_t* q_out, float* steps_out, StreamHandle stream) {
  check_reduce_args(k, m, partition_elems, block_elems);
  reduce_requant_typed<__half, false>(q_in, steps_in, k, m, partition_elems, block_elems, nullptr, LocoArgs{0.0f, true},
                                      q_out, steps_out, detail::as_stream(stream));
}

void qgz_dequant_reduce_requant_loco(const uint8_t* q_in, const float* steps_in, int k, int m,
                                     int64_t partition_elems, int64_t block_elems, void* err, Half16 err_fmt,
                                     const LocoParams& loco, uint8_t* q_out, float* steps_out, StreamHandle stream) {
  check_reduce_args(k, m, partition_elems, block_elems);
  const LocoArgs a{loco.err_beta, loco.resets_now()};
  if (err_fmt == Half16::bf16)
    reduce_requant_typed<__nv_bfloat16, true>(q_in, steps_in, k, m, partition_elems, block_elems, err, a, q_out,
                                              steps_out, detail::as_stream(stream));
  else
    reduce_requant_typed<__half, true>(q_in, steps_in, k, m, partition_elems, block_elems, err, a, q_out, steps_out,
                                       detail::as_stream(stream));
}

void qgz_dequant_reduce(const uint8_t* q_in, const float* steps_in, int k, int64_t partition_elems, int64_t block_elems,
                        float out_scale, void* out, OutFormat out_fmt, StreamHandle stream) {
  check_reduce_args(k, 1, partition_elems, block_elems);
  const auto st = detail::as_stream(stream);
  switch (out_fmt) {
    case OutFormat::f32: dequant_reduce_typed<float>(q_in, steps_in, k, partition_elems, block_elems, out_scale, out, st); break;
    case OutFormat::bf16: dequant_reduce_typed<__nv_bfloat16>(q_in, steps_in, k, partition_elems, block_elems, out_scale, out, st); break;
    case OutFormat::fp16: dequant_reduce_typed<__half>(q_in, steps_in, k, partition_elems, block_elems, out_scale, out, st); break;
  }
}

}  // namespace zk
