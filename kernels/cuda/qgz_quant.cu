// qgZ int4 kernels: swizzled quantize (optionally with LoCo), dequant-reduce-requant (optionally with
// LoCo) and the final dequant-reduce. API and layout in kernels/qgz_quant.hpp.
#include "kernels/qgz_quant.hpp"
#include <type_traits>
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_vec.cuh"
#include "kernels/cuda/quant_bits.cuh"
#include "kernels/cuda/launch_util.hpp"

namespace zk {
namespace {

// LoCo arguments as the kernels see them (err_beta and whether this step resets the error).
struct LocoArgs {
  float beta;
  bool reset;
};

// grid = (blocks_per_partition, world): one thread block per (partition p, block b).
// Input offset p*P + b*block; output slot s = swizzle(p), in chunk c = s / nodes (= p % dpn) at w = s % nodes
// (= p / dpn): bytes c*q_chunk + w*P/2 + b*block/2, step c*s_chunk + w*nb + b (back to back: q_chunk = nodes*P/2,
// s_chunk = nodes*nb, that is, slot s at s*P/2 and s*nb + b).
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
  for (int j = 0; j < V; ++j) {
    const uint32_t big = dev::quant_int4_bits(x[j], inv);
    if constexpr (LOCO) qf[j] = __uint_as_float(big) - dev::kInt4Magic;
    nib[j] = V % 8 == 0 ? big : (big & 0xFu);  // store_nibbles masks 8 at a time itself
  }
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
                                      float* __restrict__ steps, int64_t q_chunk, int64_t s_chunk) {
  const int64_t b = blockIdx.x, p = blockIdx.y, nb = gridDim.x;
  const int64_t start = b * block;
  const int64_t len = min(block, P - start);
  const int64_t in_off = p * P + start;
  const int64_t chunk = p % dpn, within = p / dpn;
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
  if (threadIdx.x == 0) steps[chunk * s_chunk + within * nb + b] = step;
  uint8_t* dst = q + chunk * q_chunk + within * (P / 2) + start / 2;
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

// Without LoCo, P % 8 == 0 and block % 8 == 0: one warp per (partition, block), warp w = p * nb + b.
// Each lane issues its R 16-byte loads before using any and keeps them raw; absmax on packed pairs
// and by shuffles (no shared memory, no barrier); past R * 256 elements the rest is re-read.
constexpr int kWarpKernelThreads = 256;

template <class T>
__device__ __forceinline__ uint32_t quantize_raw8_int4(const uint4& x, float inv) {
  float f[8];
  dev::raw8_to_f<T>(x, f);
  uint32_t nib[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) nib[j] = dev::quant_int4_bits(f[j], inv);
  return dev::pack_low_nibbles(nib);
}

template <class T, int R>
__global__ void __launch_bounds__(kWarpKernelThreads) swizzled_quant_warp_kernel(const T* __restrict__ grad, int64_t P,
                                                                                 int64_t block, int64_t nb, int nodes,
                                                                                 int dpn, int64_t nwarps,
                                                                                 uint8_t* __restrict__ q,
                                                                                 float* __restrict__ steps,
                                                                                 int64_t q_chunk, int64_t s_chunk) {
  using P2 = typename dev::Pair2<T>::type;
  const int64_t w = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (w >= nwarps) return;  // whole warps only
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t p = w / nb, b = w - p * nb;
  const int64_t start = b * block;
  const int64_t len = min(block, P - start);  // a multiple of 8
  const T* src = grad + p * P + start;
  const int64_t chunk = p % dpn, within = p / dpn;
  uint8_t* dst = q + chunk * q_chunk + within * (P / 2) + start / 2;
  constexpr int64_t kStride = 32 * 8;
  uint4 x[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = r * kStride + lane * 8;
    x[r] = i < len ? __ldg(reinterpret_cast<const uint4*>(src + i)) : make_uint4(0, 0, 0, 0);
  }
  P2 m2 = __habs2(*reinterpret_cast<const P2*>(&x[0].x));
#pragma unroll
  for (int r = 0; r < R; ++r) m2 = dev::absmax_raw8<T>(m2, x[r]);
  for (int64_t i = R * kStride + lane * 8; i < len; i += kStride)
    m2 = dev::absmax_raw8<T>(m2, __ldg(reinterpret_cast<const uint4*>(src + i)));
  const float amax = dev::warp_max(dev::pair_max<T>(m2));
  const float inv = amax > 0.0f ? kInt4Max / amax : 0.0f;
  if (lane == 0) steps[chunk * s_chunk + within * nb + b] = amax / kInt4Max;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = r * kStride + lane * 8;
    if (i < len) __stcs(reinterpret_cast<unsigned int*>(dst + i / 2), quantize_raw8_int4<T>(x[r], inv));
  }
  for (int64_t i = R * kStride + lane * 8; i < len; i += kStride)
    __stcs(reinterpret_cast<unsigned int*>(dst + i / 2),
           quantize_raw8_int4<T>(__ldg(reinterpret_cast<const uint4*>(src + i)), inv));
}

template <class T, int R>
void launch_swizzled_warp(const T* g, const QgzShape& s, uint8_t* q, float* steps, int64_t q_chunk, int64_t s_chunk,
                          cudaStream_t st) {
  const int64_t nb = s.blocks_per_partition();
  const int64_t nwarps = nb * s.world();
  const int64_t grid = detail::ceil_div(nwarps, kWarpKernelThreads / 32);
  swizzled_quant_warp_kernel<T, R><<<static_cast<unsigned>(grid), kWarpKernelThreads, 0, st>>>(
      g, s.partition_elems(), s.block_elems, nb, s.nodes, s.devices_per_node, nwarps, q, steps, q_chunk, s_chunk);
}

// acc[0..V) += deQ of V int4 values (V/2 bytes) at p with step s.
template <int V>
__device__ __forceinline__ void fma_int4(const uint8_t* p, float s, float (&acc)[V], const dev::Int4Consts& ic) {
  if constexpr (V % 8 == 0) {
    uint32_t w[V / 8];
    dev::load_int4_words<V>(p, w);
#pragma unroll
    for (int i = 0; i < V / 8; ++i) dev::fma_int4_word(w[i], s, acc + 8 * i, ic);
  } else {
    float qf[V];
    dev::load_int4_f<V>(p, qf);
#pragma unroll
    for (int t = 0; t < V; ++t) acc[t] = fmaf(qf[t], s, acc[t]);
  }
}

// Sum over k chunks of deQ for V elements at element offset off of partition j, block b (chunk order,
// one fma per chunk); chunk c's values at c*chunk_bytes, its steps at c*s_chunk. K > 0: k == K known at compile
// time, every chunk's load issued before any use.
template <int V, int K>
__device__ __forceinline__ void reduce_chunks(const uint8_t* __restrict__ q_in, const float* __restrict__ steps_in,
                                              int k, int64_t chunk_bytes, int64_t s_chunk, int64_t P, int64_t nb,
                                              int64_t j, int64_t b, int64_t off, float (&acc)[V]) {
#pragma unroll
  for (int t = 0; t < V; ++t) acc[t] = 0.0f;
  const uint8_t* src = q_in + j * (P / 2) + off / 2;
  const float* st = steps_in + j * nb + b;
  const dev::Int4Consts ic = dev::int4_consts();
  if constexpr (K > 0 && V % 8 == 0) {
    uint32_t x[K][V / 8];
    float s[K];
#pragma unroll
    for (int c = 0; c < K; ++c) {
      dev::load_int4_words<V>(src + c * chunk_bytes, x[c]);
      s[c] = __ldg(st + static_cast<int64_t>(c) * s_chunk);
    }
#pragma unroll
    for (int c = 0; c < K; ++c)
#pragma unroll
      for (int i = 0; i < V / 8; ++i) dev::fma_int4_word(x[c][i], s[c], acc + 8 * i, ic);
  } else {
#pragma unroll 8
    for (int c = 0; c < k; ++c) fma_int4<V>(src + c * chunk_bytes, __ldg(st + static_cast<int64_t>(c) * s_chunk), acc, ic);
  }
}

template <class ET, int V, int K, bool LOCO>
__device__ __forceinline__ void reduced_compensated(const uint8_t* q_in, const float* steps_in, int k, int64_t in_q,
                                                    int64_t in_s, int64_t P, int64_t nb, int64_t j, int64_t b,
                                                    int64_t off, const ET* err, LocoArgs loco, float (&x)[V],
                                                    float (&e)[V]) {
  reduce_chunks<V, K>(q_in, steps_in, k, in_q, in_s, P, nb, j, b, off, x);
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
// vectors of V per thread), recomputed from the k chunks (L1/L2) only past R * blockDim * V. Input chunk c at
// c*in_q bytes / c*in_s steps, output partition j at j*out_q / j*out_s.
template <class ET, int V, int R, int K, bool LOCO, int MINB = 1>
__global__ void __launch_bounds__(256, MINB)
    reduce_requant_kernel(const uint8_t* __restrict__ q_in, const float* __restrict__ steps_in, int k, int64_t P,
                          int64_t block, ET* __restrict__ err, LocoArgs loco, uint8_t* __restrict__ q_out,
                          float* __restrict__ steps_out, int64_t in_q, int64_t in_s, int64_t out_q, int64_t out_s) {
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
      reduced_compensated<ET, V, K, LOCO>(q_in, steps_in, k, in_q, in_s, P, nb, j, b, start + i, err, loco, x[r],
                                            e[r]);
#pragma unroll
      for (int t = 0; t < V; ++t) amax = fmaxf(amax, fabsf(x[r][t]));
    }
  }
  for (int64_t i = i0 + R * stride; i < len; i += stride) {
    float xo[V], eo[V];
    reduced_compensated<ET, V, K, LOCO>(q_in, steps_in, k, in_q, in_s, P, nb, j, b, start + i, err, loco, xo, eo);
#pragma unroll
    for (int t = 0; t < V; ++t) amax = fmaxf(amax, fabsf(xo[t]));
  }
  amax = dev::block_max(amax);
  const float step = amax / kInt4Max;
  const float inv = amax > 0.0f ? kInt4Max / amax : 0.0f;
  if (threadIdx.x == 0) steps_out[j * out_s + b] = step;
  uint8_t* dst = q_out + j * out_q + start / 2;
  ET* err_base = err + j * P + start;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t i = i0 + r * stride;
    if (i < len) quantize_store<ET, V, LOCO>(x[r], e[r], inv, step, loco, dst + i / 2, err_base + i);
  }
  for (int64_t i = i0 + R * stride; i < len; i += stride) {
    float xo[V], eo[V];
    reduced_compensated<ET, V, K, LOCO>(q_in, steps_in, k, in_q, in_s, P, nb, j, b, start + i, err, loco, xo, eo);
    quantize_store<ET, V, LOCO>(xo, eo, inv, step, loco, dst + i / 2, err_base + i);
  }
}

// One thread per V output elements of the single partition (chunk c of one partition at c*in_q bytes, its steps at
// c*in_s; back to back: P/2 and nb).
template <class OT, int V, int K>
__global__ void dequant_reduce_kernel(const uint8_t* __restrict__ q_in, const float* __restrict__ steps_in, int k,
                                      int64_t P, int64_t block, float out_scale, OT* __restrict__ out, int64_t in_q,
                                      int64_t in_s) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i >= P) return;
  const int64_t nb = (P + block - 1) / block;
  float acc[V];
  reduce_chunks<V, K>(q_in, steps_in, k, in_q, in_s, P, nb, 0, i / block, i, acc);
#pragma unroll
  for (int t = 0; t < V; ++t) acc[t] *= out_scale;
  dev::store_f<OT, V>(out + i, acc);
}

// Calls f(std::integral_constant<int, K>) with K = k for the common chunk counts 2, 4, 8 (loads of all
// chunks issued before any use), K = 0 (run-time k) otherwise.
template <class F>
void with_chunk_count(int k, F&& f) {
  switch (k) {
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    default: f(std::integral_constant<int, 0>{}); break;
  }
}

template <class T, bool LOCO>
void swizzled_typed(const void* grad, void* err, LocoArgs loco, const QgzShape& s, uint8_t* q, float* steps,
                    QgzChunks out, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(s.blocks_per_partition()), static_cast<unsigned>(s.world()));
  const auto* g = static_cast<const T*>(grad);
  auto* e = static_cast<T*>(err);
  const int64_t P = s.partition_elems();
  const int64_t qc = out.q_bytes > 0 ? out.q_bytes : s.nodes * (P / 2);
  const int64_t sc = out.steps_floats > 0 ? out.steps_floats : s.nodes * s.blocks_per_partition();
  const bool vec8 = P % 8 == 0 && s.block_elems % 8 == 0 && detail::aligned(grad, 16) && detail::aligned(err, 16) &&
                    detail::aligned(q, 4) && qc % 4 == 0;
  if (!LOCO && vec8 && s.block_elems >= 256) {
    const int64_t blk = s.block_elems;  // registers per lane: R * 256 >= block, at most 16 vectors
    if (blk <= 256) launch_swizzled_warp<T, 1>(g, s, q, steps, qc, sc, st);
    else if (blk <= 512) launch_swizzled_warp<T, 2>(g, s, q, steps, qc, sc, st);
    else if (blk <= 1024) launch_swizzled_warp<T, 4>(g, s, q, steps, qc, sc, st);
    else if (blk <= 2048) launch_swizzled_warp<T, 8>(g, s, q, steps, qc, sc, st);
    else launch_swizzled_warp<T, 16>(g, s, q, steps, qc, sc, st);
  } else if (vec8) {
    swizzled_quant_kernel<T, 8, 4, LOCO><<<grid, detail::group_threads(s.block_elems, 8 * 4), 0, st>>>(
        g, e, loco, P, s.block_elems, s.nodes, s.devices_per_node, q, steps, qc, sc);
  } else {
    detail::require(detail::aligned(grad, 4) && detail::aligned(err, 4), "qgZ quantize: grad/err must be 4-byte aligned");
    swizzled_quant_kernel<T, 2, 4, LOCO><<<grid, detail::group_threads(s.block_elems, 2 * 4), 0, st>>>(
        g, e, loco, P, s.block_elems, s.nodes, s.devices_per_node, q, steps, qc, sc);
  }
  ZK_CUDA_CHECK_LAUNCH();
}

template <class ET, bool LOCO>
void reduce_requant_typed(const uint8_t* q_in, const float* steps_in, int k, int m, int64_t P, int64_t block,
                          void* err, LocoArgs loco, uint8_t* q_out, float* steps_out, QgzChunks in, QgzChunks out,
                          cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(P, block)), static_cast<unsigned>(m));
  auto* e = static_cast<ET*>(err);
  const int64_t nb = detail::ceil_div(P, block);
  const int64_t iq = in.q_bytes > 0 ? in.q_bytes : m * (P / 2), is = in.steps_floats > 0 ? in.steps_floats : m * nb;
  const int64_t oq = out.q_bytes > 0 ? out.q_bytes : P / 2, os = out.steps_floats > 0 ? out.steps_floats : nb;
  const bool vec32 = P % 32 == 0 && block % 32 == 0 && detail::aligned(q_in, 16) && detail::aligned(q_out, 16) &&
                     detail::aligned(err, 16) && iq % 16 == 0 && oq % 16 == 0;
  if (vec32) {
    with_chunk_count(k, [&](auto kc) {
      constexpr int K = decltype(kc)::value;
      // Without LoCo: 32 values (16 bytes of each chunk) per thread, at most 128 registers (8 blocks of 64
      // threads per SM; uncapped, the hoisted loads take ~150). With LoCo: 16 values per thread, so that
      // each thread's run of the 16-bit error buffer is 32 bytes (with 32 values: 0.27 ms instead of 0.21 on
      // the H200 benchmark).
      if constexpr (LOCO) {
        reduce_requant_kernel<ET, 16, 1, K, LOCO, 1><<<grid, detail::group_threads(block, 16), 0, st>>>(
            q_in, steps_in, k, P, block, e, loco, q_out, steps_out, iq, is, oq, os);
      } else {
        reduce_requant_kernel<ET, 32, 1, K, LOCO, 2><<<grid, detail::group_threads(block, 32), 0, st>>>(
            q_in, steps_in, k, P, block, e, loco, q_out, steps_out, iq, is, oq, os);
      }
    });
  } else {
    detail::require(detail::aligned(err, 4), "qgZ reduce-requant: err must be 4-byte aligned");
    reduce_requant_kernel<ET, 2, 4, 0, LOCO><<<grid, detail::group_threads(block, 2 * 4), 0, st>>>(
        q_in, steps_in, k, P, block, e, loco, q_out, steps_out, iq, is, oq, os);
  }
  ZK_CUDA_CHECK_LAUNCH();
}

template <class OT>
void dequant_reduce_typed(const uint8_t* q_in, const float* steps_in, int k, int64_t P, int64_t block, float scale,
                          void* out, QgzChunks in, cudaStream_t st) {
  constexpr int kThreads = 256;
  auto* o = static_cast<OT*>(out);
  const int64_t iq = in.q_bytes > 0 ? in.q_bytes : P / 2;
  const int64_t is = in.steps_floats > 0 ? in.steps_floats : detail::ceil_div(P, block);
  if (P % 32 == 0 && block % 32 == 0 && detail::aligned(q_in, 16) && detail::aligned(out, 16) && iq % 16 == 0) {
    with_chunk_count(k, [&](auto kc) {
      constexpr int K = decltype(kc)::value;
      // 16 values per thread: a 32-byte run of 16-bit output each (with 32 values: 0.36 ms instead of 0.20 on
      // the H200 benchmark).
      const int64_t grid = detail::ceil_div(P / 16, kThreads);
      dequant_reduce_kernel<OT, 16, K><<<static_cast<unsigned>(grid), kThreads, 0, st>>>(q_in, steps_in, k, P, block,
                                                                                         scale, o, iq, is);
    });
  } else {
    detail::require(detail::aligned(out, 2 * sizeof(OT)), "qgZ dequant-reduce: out must be aligned to 2 elements");
    const int64_t grid = detail::ceil_div(P / 2, kThreads);
    dequant_reduce_kernel<OT, 2, 0><<<static_cast<unsigned>(grid), kThreads, 0, st>>>(q_in, steps_in, k, P, block, scale,
                                                                                    o, iq, is);
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
                           StreamHandle stream, QgzChunks out) {
  detail::require(s.valid(), "qgz_swizzled_quantize: need n % (2*world) == 0, even block_elems");
  const LocoArgs none{0.0f, true};
  if (fmt == Half16::bf16) swizzled_typed<__nv_bfloat16, false>(grad, nullptr, none, s, q_out, steps_out, out, detail::as_stream(stream));
  else swizzled_typed<__half, false>(grad, nullptr, none, s, q_out, steps_out, out, detail::as_stream(stream));
}

void qgz_swizzled_quantize_loco(const void* grad, Half16 fmt, void* err, const LocoParams& loco, const QgzShape& s,
                                uint8_t* q_out, float* steps_out, StreamHandle stream, QgzChunks out) {
  detail::require(s.valid(), "qgz_swizzled_quantize_loco: need n % (2*world) == 0, even block_elems");
  const LocoArgs a{loco.err_beta, loco.resets_now()};
  if (fmt == Half16::bf16) swizzled_typed<__nv_bfloat16, true>(grad, err, a, s, q_out, steps_out, out, detail::as_stream(stream));
  else swizzled_typed<__half, true>(grad, err, a, s, q_out, steps_out, out, detail::as_stream(stream));
}

void qgz_dequant_reduce_requant(const uint8_t* q_in, const float* steps_in, int k, int m, int64_t partition_elems,
                                int64_t block_elems, uint8_t* q_out, float* steps_out, StreamHandle stream,
                                QgzChunks in, QgzChunks out) {
  check_reduce_args(k, m, partition_elems, block_elems);
  reduce_requant_typed<__half, false>(q_in, steps_in, k, m, partition_elems, block_elems, nullptr, LocoArgs{0.0f, true},
                                      q_out, steps_out, in, out, detail::as_stream(stream));
}

void qgz_dequant_reduce_requant_loco(const uint8_t* q_in, const float* steps_in, int k, int m,
                                     int64_t partition_elems, int64_t block_elems, void* err, Half16 err_fmt,
                                     const LocoParams& loco, uint8_t* q_out, float* steps_out, StreamHandle stream,
                                     QgzChunks in, QgzChunks out) {
  check_reduce_args(k, m, partition_elems, block_elems);
  const LocoArgs a{loco.err_beta, loco.resets_now()};
  if (err_fmt == Half16::bf16)
    reduce_requant_typed<__nv_bfloat16, true>(q_in, steps_in, k, m, partition_elems, block_elems, err, a, q_out,
                                              steps_out, in, out, detail::as_stream(stream));
  else
    reduce_requant_typed<__half, true>(q_in, steps_in, k, m, partition_elems, block_elems, err, a, q_out, steps_out,
                                       in, out, detail::as_stream(stream));
}

void qgz_dequant_reduce(const uint8_t* q_in, const float* steps_in, int k, int64_t partition_elems, int64_t block_elems,
                        float out_scale, void* out, OutFormat out_fmt, StreamHandle stream, QgzChunks in) {
  check_reduce_args(k, 1, partition_elems, block_elems);
  const auto st = detail::as_stream(stream);
  switch (out_fmt) {
    case OutFormat::f32: dequant_reduce_typed<float>(q_in, steps_in, k, partition_elems, block_elems, out_scale, out, in, st); break;
    case OutFormat::bf16: dequant_reduce_typed<__nv_bfloat16>(q_in, steps_in, k, partition_elems, block_elems, out_scale, out, in, st); break;
    case OutFormat::fp16: dequant_reduce_typed<__half>(q_in, steps_in, k, partition_elems, block_elems, out_scale, out, in, st); break;
  }
}

}  // namespace zk
