// Causal grouped-query flash attention (FlashAttention-2, Dao 2023, arXiv 2307.08691), our own kernels on
// tensor cores: mma.sync m16n8k16 (bf16 / fp16 inputs, fp32 accumulation), ldmatrix from XOR-swizzled shared
// memory, cp.async double-buffered tiles.
//
// Forward: one CTA per (block of kFwdM query rows, head, batch), 8 warps of 16 rows. The CTA's Q tile stays in
// registers; K/V tiles of kFwdN keys stream through shared memory (the next one loading while this one
// computes); online softmax in the log2 domain; writes O and the per-row log-sum-exp (fp32, natural log).
// No s x s tensor exists anywhere.
//
// Backward: preprocess delta_i = rowsum(dO_i * O_i); then one CTA per (block of kBwdN keys, kv head, batch),
// 4 warps of 16 keys, keeps dK, dV of its keys in registers and walks every query head of its group and every
// query block at or after its keys (causal), recomputing P^T = exp(K Q^T * scale - lse) from the saved lse:
//   dV += P^T dO,  dP^T = V dO^T,  dS^T = P^T (dP^T - delta),  dK += dS^T Q,  dQ += dS K (fp32 atomics).
// dK, dV are summed over the group's query heads in registers (no atomics); dQ goes through an fp32
// accumulator the caller provides, then one conversion into the training dtype. The atomics make dQ's
// rounding order (and so its last bits) vary between runs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "runtime/model/device_types.cuh"
#include "runtime/model/layers.hpp"

namespace zrun::model {

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kFwdM = 128, kFwdN = 64, kFwdWarps = 8;
constexpr int kBwdM = 64, kBwdN = 64, kBwdWarps = 4;

// ---- PTX wrappers -----------------------------------------------------------------------------------------
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; zero-filled when !pred (src is then not read).
__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, bool pred) {
  const int bytes = pred ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a (16x16, row) * b (16x8, col), fp32 accumulators.
template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats as one 32-bit register of two T (x in the low half: the lower column index).
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float x, float y) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<std::uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<std::uint32_t*>(&v);
  }
}

// ---- shared-memory tiles ----------------------------------------------------------------------------------
// A tile of rows x W elements (W a multiple of 64), row-major in 16-byte chunks; chunk c of row r sits at
// chunk c ^ (r & 7), so the 8 rows an ldmatrix reads fall in 8 different bank groups.
template <int W>
__device__ __forceinline__ int swz(int row, int chunk) {
  return row * W + ((chunk ^ (row & 7)) << 3);
}

// Rows [row0, row0 + R) of a [seq, stride] tensor (columns col0 .. col0 + W) into a swizzled tile; rows at or
// past seq are zero.
template <class T, int R, int W, int NT>
__device__ __forceinline__ void load_tile(T* tile, const T* g, std::int64_t stride, int row0, int seq) {
  constexpr int kChunks = W / 8;
  for (int i = threadIdx.x; i < R * kChunks; i += NT) {
    const int r = i / kChunks, c = i % kChunks;
    const bool ok = row0 + r < seq;
    const T* src = ok ? g + static_cast<std::int64_t>(row0 + r) * stride + c * 8 : g;
    cp_async16(smem_addr(tile + swz<W>(r, c)), src, ok);
  }
}

// ---- forward ----------------------------------------------------------------------------------------------
template <class T, int D>
__global__ void __launch_bounds__(kFwdWarps * 32)
    flash_fwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,
                     float* __restrict__ lse, int seq, int heads, int kv_heads, float scale_log2) {
  constexpr int BM = kFwdM, BN = kFwdN, NT = kFwdWarps * 32;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sQ = reinterpret_cast<T*>(smem_raw);
  T* sK = sQ + BM * D;        // [2][BN * D]
  T* sV = sK + 2 * BN * D;    // [2][BN * D]

  const int m_block = gridDim.x - 1 - blockIdx.x;  // the longest (last) query blocks first
  const int head = blockIdx.y, b = blockIdx.z;
  const int kvh = head / (heads / kv_heads);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t q_stride = static_cast<std::int64_t>(heads) * D, kv_stride = static_cast<std::int64_t>(kv_heads) * D;
  const T* qg = q + static_cast<std::int64_t>(b) * seq * q_stride + head * D;
  const T* kg = k + static_cast<std::int64_t>(b) * seq * kv_stride + kvh * D;
  const T* vg = v + static_cast<std::int64_t>(b) * seq * kv_stride + kvh * D;
  const int m0 = m_block * BM;
  const int n_blocks = min((seq + BN - 1) / BN, (m0 + BM + BN - 1) / BN);

  load_tile<T, BM, D, NT>(sQ, qg, q_stride, m0, seq);
  load_tile<T, BN, D, NT>(sK, kg, kv_stride, 0, seq);
  load_tile<T, BN, D, NT>(sV, vg, kv_stride, 0, seq);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  std::uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldsm_x4(qf[kk], smem_addr(sQ + swz<D>(warp * 16 + lane % 16, kk * 2 + lane / 16)));

  float acc_o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) acc_o[i][0] = acc_o[i][1] = acc_o[i][2] = acc_o[i][3] = 0.0f;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.0f, 0.0f};
  const int row_lo = m0 + warp * 16 + lane / 4;  // this thread's rows: row_lo, row_lo + 8

  for (int n = 0; n < n_blocks; ++n) {
    const int st = n & 1;
    const T* sKs = sK + st * BN * D;
    const T* sVs = sV + st * BN * D;
    if (n > 0) {
      if (n + 1 < n_blocks) {
        load_tile<T, BN, D, NT>(sK + (st ^ 1) * BN * D, kg, kv_stride, (n + 1) * BN, seq);
        load_tile<T, BN, D, NT>(sV + (st ^ 1) * BN * D, vg, kv_stride, (n + 1) * BN, seq);
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
    } else if (n + 1 < n_blocks) {  // block 0 is in; start block 1
      load_tile<T, BN, D, NT>(sK + BN * D, kg, kv_stride, BN, seq);
      load_tile<T, BN, D, NT>(sV + BN * D, vg, kv_stride, BN, seq);
      cp_async_commit();
    }

    const int n0 = n * BN;
    if (n0 > m0 + warp * 16 + 15) {  // every key of this block is after every row of this warp
      __syncthreads();
      continue;
    }
    // S = Q K^T (16 x BN per warp).
    float s[BN / 8][4];
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        std::uint32_t bk[4];
        ldsm_x4(bk, smem_addr(sKs + swz<D>(np * 16 + (lane / 16) * 8 + lane % 8, kk * 2 + (lane / 8) % 2)));
        mma16816<T>(s[2 * np], qf[kk], bk[0], bk[1]);
        mma16816<T>(s[2 * np + 1], qf[kk], bk[2], bk[3]);
      }

    if (n0 + BN - 1 > m0 + warp * 16 || n0 + BN > seq) {  // some key past a row's position, or past the end
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = row_lo + (e / 2) * 8, j = n0 + nt * 8 + (lane % 4) * 2 + (e % 2);
          if (j > i || j >= seq) s[nt][e] = -INFINITY;
        }
    }

    // Online softmax, rows r = 0 (row_lo), 1 (row_lo + 8), in the log2 domain.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_i[r], mx * scale_log2);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float corr = exp2f(m_i[r] - m_use);
      m_i[r] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] * scale_log2 - m_use);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] * scale_log2 - m_use);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      l_i[r] = l_i[r] * corr + sum;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) acc_o[dt][2 * r] *= corr, acc_o[dt][2 * r + 1] *= corr;
    }

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const std::uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                   pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t bv[4];
        ldsm_x4_t(bv, smem_addr(sVs + swz<D>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, dp * 2 + lane / 16)));
        mma16816<T>(acc_o[2 * dp], pa, bv[0], bv[1]);
        mma16816<T>(acc_o[2 * dp + 1], pa, bv[2], bv[3]);
      }
    }
    __syncthreads();  // this stage is refilled two blocks on
  }

  float* lse_g = lse + (static_cast<std::int64_t>(b) * heads + head) * seq;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_i[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int i = row_lo + r * 8;
    if (i < seq) {
      if (lane % 4 == 0) lse_g[i] = (m_i[r] + log2f(l)) / kLog2e;
      T* orow = o + (static_cast<std::int64_t>(b) * seq + i) * q_stride + head * D;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        *reinterpret_cast<std::uint32_t*>(orow + dt * 8 + (lane % 4) * 2) =
            pack2<T>(acc_o[dt][2 * r] * inv, acc_o[dt][2 * r + 1] * inv);
    }
  }
}

// ---- backward ---------------------------------------------------------------------------------------------
// delta[b, h, i] = sum_d dO[b, i, h, d] * O[b, i, h, d]; one warp per (token, head).
template <class T, int D>
__global__ void flash_bwd_delta_kernel(const T* __restrict__ o, const T* __restrict__ dout, float* __restrict__ delta,
                                       std::int64_t rows, int seq, int heads) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const T* orow = o + row * D;
  const T* drow = dout + row * D;
  float sum = 0.0f;
  for (int d = lane; d < D; d += 32) sum += to_f(orow[d]) * to_f(drow[d]);
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) {
    const std::int64_t token = row / heads;
    const int h = static_cast<int>(row % heads);
    const std::int64_t bi = token / seq, i = token % seq;
    delta[(bi * heads + h) * seq + i] = sum;
  }
}

template <class T>
__global__ void convert_kernel(const float* __restrict__ src, T* __restrict__ dst, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    dst[i] = from_f<T>(src[i]);
}

template <class T, int D>
__global__ void __launch_bounds__(kBwdWarps * 32)
    flash_bwd_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                     const float* __restrict__ lse, const T* __restrict__ dout, const float* __restrict__ delta,
                     float* __restrict__ dq_accum, T* __restrict__ dk, T* __restrict__ dv, int seq, int heads,
                     int kv_heads, float scale) {
  constexpr int BM = kBwdM, BN = kBwdN, NT = kBwdWarps * 32;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * D;
  T* sQ = sV + BN * D;       // [2][BM * D]
  T* sdO = sQ + 2 * BM * D;  // [2][BM * D]
  T* sdS = sdO + 2 * BM * D; // dS^T [BN keys][BM queries]
  float* sL = reinterpret_cast<float*>(sdS + BN * BM);  // [2][BM]: lse * log2(e), +inf past the end
  float* sDelta = sL + 2 * BM;                          // [2][BM]

  const int n_block = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  const int group = heads / kv_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t q_stride = static_cast<std::int64_t>(heads) * D, kv_stride = static_cast<std::int64_t>(kv_heads) * D;
  const int n0 = n_block * BN;
  const int m_first = n0 / BM, m_blocks = (seq + BM - 1) / BM;
  const int per_head = m_blocks - m_first, iters = group * per_head;
  const float scale_log2 = scale * kLog2e;

  const std::int64_t kv_off = static_cast<std::int64_t>(b) * seq * kv_stride + kvh * D;
  // Query head and first row of iteration it.
  auto head_of = [&](int it) { return kvh * group + it / per_head; };
  auto row0_of = [&](int it) { return (m_first + it % per_head) * BM; };
  auto load_q_tiles = [&](int it, int st) {
    const int hh = head_of(it), m0 = row0_of(it);
    const std::int64_t off = static_cast<std::int64_t>(b) * seq * q_stride + hh * D;
    load_tile<T, BM, D, NT>(sQ + st * BM * D, q + off, q_stride, m0, seq);
    load_tile<T, BM, D, NT>(sdO + st * BM * D, dout + off, q_stride, m0, seq);
    const std::int64_t rows = (static_cast<std::int64_t>(b) * heads + hh) * seq;
    for (int i = threadIdx.x; i < BM; i += NT) {
      const bool ok = m0 + i < seq;
      sL[st * BM + i] = ok ? lse[rows + m0 + i] * kLog2e : INFINITY;
      sDelta[st * BM + i] = ok ? delta[rows + m0 + i] : 0.0f;
    }
  };

  load_tile<T, BN, D, NT>(sK, k + kv_off, kv_stride, n0, seq);
  load_tile<T, BN, D, NT>(sV, v + kv_off, kv_stride, n0, seq);
  load_q_tiles(0, 0);
  cp_async_commit();

  float acc_dk[D / 8][4], acc_dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_dk[i][e] = acc_dv[i][e] = 0.0f;
  const int key_lo = n0 + warp * 16 + lane / 4;  // this thread's keys: key_lo, key_lo + 8

  for (int it = 0; it < iters; ++it) {
    const int st = it & 1;
    if (it + 1 < iters) {
      load_q_tiles(it + 1, st ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* sQs = sQ + st * BM * D;
    const T* sdOs = sdO + st * BM * D;
    const float* sLs = sL + st * BM;
    const float* sDs = sDelta + st * BM;
    const int hh = head_of(it), m0 = row0_of(it);

    // S^T = K Q^T: 16 keys x BM queries per warp.
    float s[BM / 8][4];
#pragma unroll
    for (int i = 0; i < BM / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t ka[4];
      ldsm_x4(ka, smem_addr(sK + swz<D>(warp * 16 + lane % 16, kk * 2 + lane / 16)));
#pragma unroll
      for (int np = 0; np < BM / 16; ++np) {
        std::uint32_t bq[4];
        ldsm_x4(bq, smem_addr(sQs + swz<D>(np * 16 + (lane / 16) * 8 + lane % 8, kk * 2 + (lane / 8) % 2)));
        mma16816<T>(s[2 * np], ka, bq[0], bq[1]);
        mma16816<T>(s[2 * np + 1], ka, bq[2], bq[3]);
      }
    }
    // P^T = exp(S^T * scale - lse), zero where the key is after the query (or past the end).
#pragma unroll
    for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int jj = key_lo + (e / 2) * 8, ic = nt * 8 + (lane % 4) * 2 + (e % 2);
        s[nt][e] = jj <= m0 + ic ? exp2f(s[nt][e] * scale_log2 - sLs[ic]) : 0.0f;
      }

    // dP^T = V dO^T.
    float dp[BM / 8][4];
#pragma unroll
    for (int i = 0; i < BM / 8; ++i) dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      std::uint32_t va[4];
      ldsm_x4(va, smem_addr(sV + swz<D>(warp * 16 + lane % 16, kk * 2 + lane / 16)));
#pragma unroll
      for (int np = 0; np < BM / 16; ++np) {
        std::uint32_t bo[4];
        ldsm_x4(bo, smem_addr(sdOs + swz<D>(np * 16 + (lane / 16) * 8 + lane % 8, kk * 2 + (lane / 8) % 2)));
        mma16816<T>(dp[2 * np], va, bo[0], bo[1]);
        mma16816<T>(dp[2 * np + 1], va, bo[2], bo[3]);
      }
    }

    // dV += P^T dO (P^T as the A operand, straight from the accumulators).
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      const std::uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                   pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dpi = 0; dpi < D / 16; ++dpi) {
        std::uint32_t bo[4];
        ldsm_x4_t(bo, smem_addr(sdOs + swz<D>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, dpi * 2 + lane / 16)));
        mma16816<T>(acc_dv[2 * dpi], pa, bo[0], bo[1]);
        mma16816<T>(acc_dv[2 * dpi + 1], pa, bo[2], bo[3]);
      }
    }

    // dS^T = P^T (dP^T - delta), kept in s.
#pragma unroll
    for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = s[nt][e] * (dp[nt][e] - sDs[nt * 8 + (lane % 4) * 2 + (e % 2)]);

    // dK += dS^T Q; dS^T to shared memory for dQ.
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      const std::uint32_t da[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                   pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const int r_lo = warp * 16 + lane / 4, col = kk * 16 + (lane % 4) * 2;
      *reinterpret_cast<std::uint32_t*>(sdS + swz<BM>(r_lo, col / 8) + col % 8) = da[0];
      *reinterpret_cast<std::uint32_t*>(sdS + swz<BM>(r_lo + 8, col / 8) + col % 8) = da[1];
      *reinterpret_cast<std::uint32_t*>(sdS + swz<BM>(r_lo, col / 8 + 1) + col % 8) = da[2];
      *reinterpret_cast<std::uint32_t*>(sdS + swz<BM>(r_lo + 8, col / 8 + 1) + col % 8) = da[3];
#pragma unroll
      for (int dpi = 0; dpi < D / 16; ++dpi) {
        std::uint32_t bq[4];
        ldsm_x4_t(bq, smem_addr(sQs + swz<D>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8, dpi * 2 + lane / 16)));
        mma16816<T>(acc_dk[2 * dpi], da, bq[0], bq[1]);
        mma16816<T>(acc_dk[2 * dpi + 1], da, bq[2], bq[3]);
      }
    }
    __syncthreads();

    // dQ (warp: queries warp*16 ..) += scale * dS K, in halves of 64 columns, added to the fp32 accumulator.
    const int qi = m0 + warp * 16 + lane / 4;
    float* dq_row = dq_accum + (static_cast<std::int64_t>(b) * seq + qi) * q_stride + hh * D;
#pragma unroll
    for (int half = 0; half < D / 64; ++half) {
      float acc[8][4];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        std::uint32_t a[4];
        ldsm_x4_t(a, smem_addr(sdS + swz<BM>(kk * 16 + lane % 8 + (lane / 16) * 8, warp * 2 + (lane / 8) % 2)));
#pragma unroll
        for (int dpi = 0; dpi < 4; ++dpi) {
          std::uint32_t bk[4];
          ldsm_x4_t(bk, smem_addr(sK + swz<D>(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8,
                                              half * 8 + dpi * 2 + lane / 16)));
          mma16816<T>(acc[2 * dpi], a, bk[0], bk[1]);
          mma16816<T>(acc[2 * dpi + 1], a, bk[2], bk[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int col = half * 64 + nt * 8 + (lane % 4) * 2;
        if (qi < seq) {
          atomicAdd(reinterpret_cast<float2*>(dq_row + col), make_float2(acc[nt][0] * scale, acc[nt][1] * scale));
        }
        if (qi + 8 < seq) {
          atomicAdd(reinterpret_cast<float2*>(dq_row + 8 * q_stride + col),
                    make_float2(acc[nt][2] * scale, acc[nt][3] * scale));
        }
      }
    }
    __syncthreads();  // sdS and this stage's tiles are rewritten next
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = key_lo + r * 8;
    if (j >= seq) continue;
    const std::int64_t off = (static_cast<std::int64_t>(b) * seq + j) * kv_stride + kvh * D;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int col = dt * 8 + (lane % 4) * 2;
      *reinterpret_cast<std::uint32_t*>(dk + off + col) =
          pack2<T>(acc_dk[dt][2 * r] * scale, acc_dk[dt][2 * r + 1] * scale);
      *reinterpret_cast<std::uint32_t*>(dv + off + col) = pack2<T>(acc_dv[dt][2 * r], acc_dv[dt][2 * r + 1]);
    }
  }
}

constexpr std::int64_t fwd_smem_bytes(int d) { return static_cast<std::int64_t>(kFwdM + 4 * kFwdN) * d * 2; }
constexpr std::int64_t bwd_smem_bytes(int d) {
  return static_cast<std::int64_t>(2 * kBwdN + 4 * kBwdM) * d * 2 + kBwdN * kBwdM * 2 + 4 * kBwdM * 4;
}

void check_shape(DType dt, const AttentionShape& a) {
  if (!flash_attention_supported(dt, a.head_dim))
    throw std::invalid_argument("flash attention: runs bf16 / fp16 with head dim 64 or 128, got " +
                                std::string(dtype_name(dt)) + " head dim " + std::to_string(a.head_dim));
  if (a.kv_heads <= 0 || a.heads % a.kv_heads != 0)
    throw std::invalid_argument("flash attention: heads must be a multiple of kv_heads");
}

// Calls f(T{}, std::integral_constant<int, D>{}) for the dtype and head dim.
template <class F>
void dispatch(DType dt, std::int64_t d, F&& f) {
  auto by_dim = [&](auto z) {
    if (d == 64)
      f(z, std::integral_constant<int, 64>{});
    else
      f(z, std::integral_constant<int, 128>{});
  };
  if (dt == DType::bf16)
    by_dim(__nv_bfloat16{});
  else
    by_dim(__half{});
}

}  // namespace

std::int64_t flash_attention_lse_floats(const AttentionShape& a) { return a.batch * a.heads * a.seq; }

void flash_attention_forward(DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                             void* out, float* lse, cudaStream_t s) {
  check_shape(dt, a);
  if (a.batch * a.seq == 0) return;
  const float scale_log2 = kLog2e / std::sqrt(static_cast<float>(a.head_dim));
  dispatch(dt, a.head_dim, [&](auto z, auto dim) {
    using T = decltype(z);
    constexpr int D = decltype(dim)::value;
    constexpr std::int64_t smem = fwd_smem_bytes(D);
    ZK_CUDA_CHECK(cudaFuncSetAttribute(flash_fwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>((a.seq + kFwdM - 1) / kFwdM), static_cast<unsigned>(a.heads),
                    static_cast<unsigned>(a.batch));
    flash_fwd_kernel<T, D><<<grid, kFwdWarps * 32, smem, s>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<T*>(out), lse,
        static_cast<int>(a.seq), static_cast<int>(a.heads), static_cast<int>(a.kv_heads), scale_log2);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void flash_attention_backward(DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                              const void* out, const float* lse, const void* dout, float* delta, float* dq_accum,
                              void* dq, void* dk, void* dv, cudaStream_t s) {
  check_shape(dt, a);
  if (a.batch * a.seq == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  const std::int64_t q_elems = a.batch * a.seq * a.heads * a.head_dim;
  ZK_CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, q_elems * sizeof(float), s));
  dispatch(dt, a.head_dim, [&](auto z, auto dim) {
    using T = decltype(z);
    constexpr int D = decltype(dim)::value;
    const std::int64_t rows = a.batch * a.seq * a.heads;
    flash_bwd_delta_kernel<T, D><<<grid_for(rows, 8), 256, 0, s>>>(static_cast<const T*>(out),
                                                                     static_cast<const T*>(dout), delta, rows,
                                                                     static_cast<int>(a.seq),
                                                                     static_cast<int>(a.heads));
    ZK_CUDA_CHECK_LAUNCH();
    constexpr std::int64_t smem = bwd_smem_bytes(D);
    ZK_CUDA_CHECK(cudaFuncSetAttribute(flash_bwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>((a.seq + kBwdN - 1) / kBwdN), static_cast<unsigned>(a.kv_heads),
                    static_cast<unsigned>(a.batch));
    flash_bwd_kernel<T, D><<<grid, kBwdWarps * 32, smem, s>>>(
        static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), lse,
        static_cast<const T*>(dout), delta, dq_accum, static_cast<T*>(dk), static_cast<T*>(dv),
        static_cast<int>(a.seq), static_cast<int>(a.heads), static_cast<int>(a.kv_heads), scale);
    ZK_CUDA_CHECK_LAUNCH();
    convert_kernel<T><<<static_cast<unsigned>(std::min<std::int64_t>((q_elems + 255) / 256, 4096)), 256, 0, s>>>(
        dq_accum, static_cast<T*>(dq), q_elems);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

}  // namespace zrun::model
