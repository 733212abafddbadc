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

GemmCall attention_gemm_call(AttentionProduct p, DType dt, const AttentionShape& a, const AttentionTensors& t,
                             std::int64_t bi, std::int64_t r) {
  const std::int64_t d = a.head_dim, S = a.seq, group = a.heads / a.kv_heads;
  const std::int64_t h = a.heads * d, kvd = a.kv_heads * d, es = dt == DType::fp32 ? 4 : 2;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const HeadOffsets o = offsets(a, bi, r);
  GemmCall c;
  c.batch = static_cast<int>(a.kv_heads);
  switch (p) {
    case AttentionProduct::scores:  // scores^T (s_j x s_i) = K (s_j x d) Q^T (d x s_i), per kv head
    case AttentionProduct::dprobs:  // dP^T (s_j x s_i) = V (s_j x d) dO^T (d x s_i)
      c.trans_a = true;
      c.m = S, c.n = S, c.k = d;
      c.alpha = p == AttentionProduct::scores ? scale : 1.0f;
      c.a = at(p == AttentionProduct::scores ? t.k : t.v, o.kv, es), c.lda = kvd, c.stride_a = d;
      c.b = at(p == AttentionProduct::scores ? t.q : t.dout, o.q, es), c.ldb = h, c.stride_b = group * d;
      c.d = at(p == AttentionProduct::scores ? t.probs : t.dprobs, o.p, es), c.ldd = S, c.stride_d = group * S * S;
      break;
    case AttentionProduct::probs_v:  // out^T (d x s_i) = V^T (d x s_j) P^T (s_j x s_i)
    case AttentionProduct::dq:       // dQ^T (d x s_i) = scale * K^T (d x s_j) dS^T (s_j x s_i)
      c.m = d, c.n = S, c.k = S;
      c.alpha = p == AttentionProduct::dq ? scale : 1.0f;
      c.a = at(p == AttentionProduct::probs_v ? t.v : t.k, o.kv, es), c.lda = kvd, c.stride_a = d;
      c.b = at(p == AttentionProduct::probs_v ? t.probs : t.dprobs, o.p, es), c.ldb = S, c.stride_b = group * S * S;
      c.d = at(p == AttentionProduct::probs_v ? t.out : t.dq, o.q, es), c.ldd = h, c.stride_d = group * d;
      break;
    case AttentionProduct::dv:  // dV^T (d x s_j) (+)= dO^T (d x s_i) P (s_i x s_j); the group's query heads add up
    case AttentionProduct::dk:  // dK^T (d x s_j) (+)= scale * Q^T (d x s_i) dS (s_i x s_j)
      c.trans_b = true;
      c.m = d, c.n = S, c.k = S;
      c.alpha = p == AttentionProduct::dk ? scale : 1.0f;
      c.beta = r == 0 ? 0.0f : 1.0f;
      c.a = at(p == AttentionProduct::dv ? t.dout : t.q, o.q, es), c.lda = h, c.stride_a = group * d;
      c.b = at(p == AttentionProduct::dv ? t.probs : t.dprobs, o.p, es), c.ldb = S, c.stride_b = group * S * S;
      c.d = at(p == AttentionProduct::dv ? t.dv : t.dk, o.kv, es), c.ldd = kvd, c.stride_d = d;
      break;
  }
  return c;
}

void attention_forward(Gemm& g, DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                       void* probs, void* out, cudaStream_t s) {
  const std::int64_t group = a.heads / a.kv_heads;
  AttentionTensors t;
  t.q = q, t.k = k, t.v = v, t.probs = probs, t.out = out;
  for (std::int64_t bi = 0; bi < a.batch; ++bi)
    for (std::int64_t r = 0; r < group; ++r) g.run(attention_gemm_call(AttentionProduct::scores, dt, a, t, bi, r), dt, s);
  causal_softmax_forward(dt, probs, a.batch * a.heads, a.seq, s);
  for (std::int64_t bi = 0; bi < a.batch; ++bi)
    for (std::int64_t r = 0; r < group; ++r) g.run(attention_gemm_call(AttentionProduct::probs_v, dt, a, t, bi, r), dt, s);
}

void attention_backward(Gemm& g, DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                        const void* probs, const void* dout, void* dprobs, void* dq, void* dk, void* dv,
                        cudaStream_t s) {
  const std::int64_t group = a.heads / a.kv_heads;
  AttentionTensors t;
  t.q = q, t.k = k, t.v = v, t.dout = dout, t.dprobs = dprobs, t.dq = dq, t.dk = dk, t.dv = dv;
  t.probs = const_cast<void*>(probs);  // only read: no backward product writes it
  for (std::int64_t bi = 0; bi < a.batch; ++bi)
    for (std::int64_t r = 0; r < group; ++r) {
      g.run(attention_gemm_call(AttentionProduct::dprobs, dt, a, t, bi, r), dt, s);
      g.run(attention_gemm_call(AttentionProduct::dv, dt, a, t, bi, r), dt, s);
    }
  causal_softmax_backward(dt, probs, dprobs, a.batch * a.heads, a.seq, s);
  for (std::int64_t bi = 0; bi < a.batch; ++bi)
    for (std::int64_t r = 0; r < group; ++r) {
      g.run(attention_gemm_call(AttentionProduct::dq, dt, a, t, bi, r), dt, s);
      g.run(attention_gemm_call(AttentionProduct::dk, dt, a, t, bi, r), dt, s);
    }
}

}  // namespace zrun::model
