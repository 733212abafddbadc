// Causal grouped-query attention with materialised scores, as zsim's activation model assumes:
// scores = q k^T / sqrt(d) per (batch, head) by strided-batched cuBLASLt GEMMs, a causal softmax kernel that
// writes probs over the scores in place, out = probs v. Backward: d(probs) = dout v^T, softmax backward in
// place, dq = d(scores) k, dk = d(scores)^T q, dv = probs^T dout, summed over the query heads of a kv head.
//
// Head hh = g * group + r reads kv head g (group = heads / kv_heads). For fixed (batch bi, r), the kv heads g
// are one strided batch: q at stride group * d, k and v at stride d, probs at stride group * s * s.
#include <cmath>

#include "runtime/model/device_types.cuh"
#include "runtime/model/layers.hpp"

namespace zrun::model {

namespace {
template <class T>
__global__ void causal_softmax(T* p, std::int64_t s) {
  const std::int64_t row = blockIdx.x;  // (batch, head, i)
  const std::int64_t i = row % s;
  T* pr = p + row * s;
  float mx = -INFINITY;
  for (std::int64_t j = threadIdx.x; j <= i; j += blockDim.x) mx = fmaxf(mx, to_f(pr[j]));
  mx = block_max(mx);
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j <= i; j += blockDim.x) sum += __expf(to_f(pr[j]) - mx);
  const float inv = 1.0f / block_sum(sum);
  for (std::int64_t j = threadIdx.x; j < s; j += blockDim.x)
    pr[j] = from_f<T>(j <= i ? __expf(to_f(pr[j]) - mx) * inv : 0.0f);
}

// dp <- p * (dp - sum_j p dp), per row.
template <class T>
__global__ void softmax_backward(const T* p, T* dp, std::int64_t s) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t i = row % s;
  const T* pr = p + row * s;
  T* dr = dp + row * s;
  float dot = 0.0f;
  for (std::int64_t j = threadIdx.x; j <= i; j += blockDim.x) dot += to_f(pr[j]) * to_f(dr[j]);
  dot = block_sum(dot);
  for (std::int64_t j = threadIdx.x; j < s; j += blockDim.x)
    dr[j] = from_f<T>(j <= i ? to_f(pr[j]) * (to_f(dr[j]) - dot) : 0.0f);
}

int row_threads(std::int64_t s) { return s >= 512 ? 256 : (s >= 128 ? 128 : 32); }

// Element offsets of batch bi, query-head remainder r.
struct HeadOffsets {
  std::int64_t q, kv, p;
};
HeadOffsets offsets(const AttentionShape& a, std::int64_t bi, std::int64_t r) {
  const std::int64_t h = a.heads * a.head_dim, kvd = a.kv_heads * a.head_dim;
  return {bi * a.seq * h + r * a.head_dim, bi * a.seq * kvd, (bi * a.heads + r) * a.seq * a.seq};
}

const char* at(const void* p, std::int64_t elems, std::int64_t es) { return static_cast<const char*>(p) + elems * es; }
char* at(void* p, std::int64_t elems, std::int64_t es) { return static_cast<char*>(p) + elems * es; }
}  // namespace

void causal_softmax_forward(DType dt, void* probs, std::int64_t matrices, std::int64_t seq, cudaStream_t s) {
  if (matrices * seq == 0) return;
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    causal_softmax<T><<<static_cast<unsigned>(matrices * seq), row_threads(seq), 0, s>>>(static_cast<T*>(probs), seq);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void causal_softmax_backward(DType dt, const void* probs, void* dprobs, std::int64_t matrices, std::int64_t seq,
                             cudaStream_t s) {
  if (matrices * seq == 0) return;
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    softmax_backward<T><<<static_cast<unsigned>(matrices * seq), row_threads(seq), 0, s>>>(
        static_cast<const T*>(probs), static_cast<T*>(dprobs), seq);
  });
  ZK_CUDA_CHECK_LAUNCH();
}

void attention_forward(Gemm& g, DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                       void* probs, void* out, cudaStream_t s) {
  const std::int64_t d = a.head_dim, S = a.seq, group = a.heads / a.kv_heads;
  const std::int64_t h = a.heads * d, kvd = a.kv_heads * d, es = dt == DType::fp32 ? 4 : 2;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (std::int64_t bi = 0; bi < a.batch; ++bi)
    for (std::int64_t r = 0; r < group; ++r) {
      const HeadOffsets o = offsets(a, bi, r);
      GemmCall sc;  // scores^T (s_j x s_i) = K (s_j x d) Q^T (d x s_i), per kv head
      sc.trans_a = true;
      sc.m = S, sc.n = S, sc.k = d, sc.alpha = scale;
      sc.a = at(k, o.kv, es), sc.lda = kvd, sc.stride_a = d;
      sc.b = at(q, o.q, es), sc.ldb = h, sc.stride_b = group * d;
      sc.d = at(probs, o.p, es), sc.ldd = S, sc.stride_d = group * S * S;
      sc.batch = static_cast<int>(a.kv_heads);
      g.run(sc, dt, s);
    }
  causal_softmax_forward(dt, probs, a.batch * a.heads, S, s);
  for (std::int64_t bi = 0; bi < a.batch; ++bi)
    for (std::int64_t r = 0; r < group; ++r) {
      const HeadOffsets o = offsets(a, bi, r);
      GemmCall pv;  // out^T (d x s_i) = V^T (d x s_j) P^T (s_j x s_i)
      pv.m = d, pv.n = S, pv.k = S;
      pv.a = at(v, o.kv, es), pv.lda = kvd, pv.stride_a = d;
      pv.b = at(probs, o.p, es), pv.ldb = S, pv.stride_b = group * S * S;
      pv.d = at(out, o.q, es), pv.ldd = h, pv.stride_d = group * d;
      pv.batch = static_cast<int>(a.kv_heads);
      g.run(pv, dt, s);
    }
}

void attention_backward(Gemm& g, DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                        const void* probs, const void* dout, void* dprobs, void* dq, void* dk, void* dv,
                        cudaStream_t s) {
  const std::int64_t d = a.head_dim, S = a.seq, group = a.heads / a.kv_heads;
  const std::int64_t h = a.heads * d, kvd = a.kv_heads * d, es = dt == DType::fp32 ? 4 : 2;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (std::int64_t bi = 0; bi < a.batch; ++bi)
    for (std::int64_t r = 0; r < group; ++r) {
      const HeadOffsets o = offsets(a, bi, r);
      GemmCall dp;  // dP^T (s_j x s_i) = V (s_j x d) dO^T (d x s_i)
      dp.trans_a = true;
      dp.m = S, dp.n = S, dp.k = d;
      dp.a = at(v, o.kv, es), dp.lda = kvd, dp.stride_a = d;
      dp.b = at(dout, o.q, es), dp.ldb = h, dp.stride_b = group * d;
      dp.d = at(dprobs, o.p, es), dp.ldd = S, dp.stride_d = group * S * S;
      dp.batch = static_cast<int>(a.kv_heads);
      g.run(dp, dt, s);
      GemmCall gv;  // dV^T (d x s_j) (+)= dO^T (d x s_i) P (s_i x s_j); the group's query heads add up
      gv.trans_b = true;
      gv.m = d, gv.n = S, gv.k = S, gv.beta = r == 0 ? 0.0f : 1.0f;
      gv.a = at(dout, o.q, es), gv.lda = h, gv.stride_a = group * d;
      gv.b = at(probs, o.p, es), gv.ldb = S, gv.stride_b = group * S * S;
      gv.d = at(dv, o.kv, es), gv.ldd = kvd, gv.stride_d = d;
      gv.batch = static_cast<int>(a.kv_heads);
      g.run(gv, dt, s);
    }
  causal_softmax_backward(dt, probs, dprobs, a.batch * a.heads, S, s);
  for (std::int64_t bi = 0; bi < a.batch; ++bi)
    for (std::int64_t r = 0; r < group; ++r) {
      const HeadOffsets o = offsets(a, bi, r);
      GemmCall gq;  // dQ^T (d x s_i) = scale * K^T (d x s_j) dS^T (s_j x s_i)
      gq.m = d, gq.n = S, gq.k = S, gq.alpha = scale;
      gq.a = at(k, o.kv, es), gq.lda = kvd, gq.stride_a = d;
      gq.b = at(dprobs, o.p, es), gq.ldb = S, gq.stride_b = group * S * S;
      gq.d = at(dq, o.q, es), gq.ldd = h, gq.stride_d = group * d;
      gq.batch = static_cast<int>(a.kv_heads);
      g.run(gq, dt, s);
      GemmCall gk;  // dK^T (d x s_j) (+)= scale * Q^T (d x s_i) dS (s_i x s_j)
      gk.trans_b = true;
      gk.m = d, gk.n = S, gk.k = S, gk.alpha = scale, gk.beta = r == 0 ? 0.0f : 1.0f;
      gk.a = at(q, o.q, es), gk.lda = h, gk.stride_a = group * d;
      gk.b = at(dprobs, o.p, es), gk.ldb = S, gk.stride_b = group * S * S;
      gk.d = at(dk, o.kv, es), gk.ldd = kvd, gk.stride_d = d;
      gk.batch = static_cast<int>(a.kv_heads);
      g.run(gk, dt, s);
    }
}

}  // namespace zrun::model
