// Launchers of the model's kernels, one family per file: embedding.cu, norm.cu, attention.cu, mlp.cu,
// head_loss.cu, column_sums.cu. Pointers are device memory in the training dtype `dt` unless typed;
// everything runs on `s`. Gradients of parameters ACCUMULATE (+=) into what the caller holds.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/model/gemm.hpp"
#include "runtime/model/dtype.hpp"
#include "runtime/model/flash_attention.hpp"

namespace zrun::model {



// embedding.cu. out[t] = tokens_table[tok[t]] (+ positions[t % seq]).
void embedding_forward(DType dt, const std::int32_t* tok, const void* table, const void* positions, void* out,
                       std::int64_t tokens, std::int64_t seq, std::int64_t h, cudaStream_t s);
// d_table[tok[t]] += dout[t]; d_positions[p] += sum over the batch of dout[b * seq + p]. Deterministic (no
// atomics): each row's tokens are summed in fp32 in position order, then added once. scratch: device memory
// of embedding_backward_scratch_bytes(tokens).
std::int64_t embedding_backward_scratch_bytes(std::int64_t tokens);
void embedding_backward(DType dt, const std::int32_t* tok, const void* dout, void* d_table, void* d_positions,
                        std::int64_t tokens, std::int64_t seq, std::int64_t h, void* scratch, cudaStream_t s);

// column_sums.cu. Partial column sums live in fp32 scratch of column_partials_floats(cols) floats.
std::int64_t column_partial_rows(std::int64_t rows);
std::int64_t column_partials_floats(std::int64_t rows, std::int64_t cols);
// dbias[c] += sum_r dy[r, c].
void bias_backward(DType dt, const void* dy, void* dbias, std::int64_t rows, std::int64_t cols, float* scratch,
                   cudaStream_t s);
// dst[c] += sum over p < parts of partials[p * cols + c] (fp32 partials, dst in dt).
void add_column_partials(DType dt, const float* partials, std::int64_t parts, std::int64_t cols, void* dst,
                         cudaStream_t s);

// norm.cu. LayerNorm (layernorm: y = (x - mean) * rstd * w + b) or RMSNorm (y = x * rstd * w), rows of h.
// stats: fp32 [2, rows] = mean (0 for RMSNorm), rstd.
void norm_forward(DType dt, bool layernorm, const void* x, const void* w, const void* b, void* y, float* stats,
                  std::int64_t rows, std::int64_t h, float eps, cudaStream_t s);
// dx (+)= d(norm)/dx . dy (accumulate_dx: add into dx, the residual stream's gradient); dw += ..., db += ...
// (db only for LayerNorm). scratch: fp32, 2 * column_partials_floats(rows, h).
void norm_backward(DType dt, bool layernorm, const void* x, const void* w, const float* stats, const void* dy,
                   void* dx, bool accumulate_dx, void* dw, void* db, std::int64_t rows, std::int64_t h,
                   float* scratch, cudaStream_t s);

// attention.cu. Causal grouped-query attention with the scores materialised: q [b*s, heads*d],
// k, v [b*s, kv_heads*d], probs [b, heads, s, s] (softmax of q k^T / sqrt(d), zero above the diagonal),
// out [b*s, heads*d]. Query head hh reads kv head hh / (heads / kv_heads).
struct AttentionShape {
  std::int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
};
void attention_forward(Gemm& g, DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                       void* probs, void* out, cudaStream_t s);
// dq = ..., dk = ..., dv = ... (overwritten); dprobs is scratch of the size of probs.
void attention_backward(Gemm& g, DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                        const void* probs, const void* dout, void* dprobs, void* dq, void* dk, void* dv,
                        cudaStream_t s);
// The strided-batched cuBLASLt GEMMs of the eager path: attention_forward and attention_backward issue, for each
// sequence bi and query-head remainder r (query head g * group + r of kv head g, group = heads / kv_heads), one call
// per product over the kv heads (batch = kv_heads), column-major as gemm.hpp (s = seq, d = head_dim):
//   scores   S^T (s x s) = K (s x d) Q^T (d x s)               m = s, n = s, k = d   (A transposed)
//   probs_v  O^T (d x s) = V^T (d x s) P^T (s x s)             m = d, n = s, k = s
//   dprobs   dP^T (s x s) = V dO^T                             m = s, n = s, k = d   (A transposed)
//   dv       dV^T (d x s) (+)= dO^T P                          m = d, n = s, k = s   (B transposed; + for r > 0)
//   dq       dQ^T (d x s) = K^T dS^T / sqrt(d)                 m = d, n = s, k = s
//   dk       dK^T (d x s) (+)= Q^T dS / sqrt(d)                m = d, n = s, k = s   (B transposed; + for r > 0)
// dprobs, dq and dk are the calls of scores, probs_v and dv on other operands. zrun calibrate times these calls on
// attention shapes (the GEMM model's batched samples).
enum class AttentionProduct { scores, probs_v, dprobs, dv, dq, dk };
struct AttentionTensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* dout = nullptr;
  void* probs = nullptr;   // [b, heads, s, s]: written by scores, read by the rest
  void* dprobs = nullptr;  // d(probs), then d(scores) in place: written by dprobs, read by dq and dk
  void* out = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
};
GemmCall attention_gemm_call(AttentionProduct p, DType dt, const AttentionShape& a, const AttentionTensors& t,
                             std::int64_t bi, std::int64_t r);
// The two memory-bound kernels of the eager path on `matrices` (= batch x heads) s x s score matrices, in place:
// the causal row softmax (probs <- softmax of each row's first i + 1 scores, 0 above the diagonal) and its
// backward (dprobs <- probs * (dprobs - rowsum(probs * dprobs)) below the diagonal, 0 above). zrun calibrate
// measures them as the `softmax` kernel kind.
void causal_softmax_forward(DType dt, void* probs, std::int64_t matrices, std::int64_t seq, cudaStream_t s);
void causal_softmax_backward(DType dt, const void* probs, void* dprobs, std::int64_t matrices, std::int64_t seq,
                             cudaStream_t s);

// flash_attention.cu. The same attention without the scores (FlashAttention-2 on tensor cores): bf16 / fp16,
// head dim 64 or 128 (flash_attention_supported). lse: fp32 [b, heads, s], the natural-log log-sum-exp of
// each row of scaled scores, what the backward recomputes the probabilities from.
std::int64_t flash_attention_lse_floats(const AttentionShape& a);
void flash_attention_forward(DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                             void* out, float* lse, cudaStream_t s);
// dq, dk, dv overwritten. Scratch: delta fp32 [b, heads, s] (rowsum(dout * out)), dq_accum fp32 [b*s, heads*d].
// dq's fp32 sums are atomic, so its last bits may differ between runs (dk, dv do not).
void flash_attention_backward(DType dt, const AttentionShape& a, const void* q, const void* k, const void* v,
                              const void* out, const float* lse, const void* dout, float* delta, float* dq_accum,
                              void* dq, void* dk, void* dv, cudaStream_t s);

// mlp.cu. Elementwise parts of the MLP over n elements. GeLU is the tanh approximation (GPT-2).
void swiglu_forward(DType dt, const void* gate, const void* up, void* act, std::int64_t n, cudaStream_t s);
void gelu_forward(DType dt, const void* pre, void* act, std::int64_t n, cudaStream_t s);
void swiglu_backward_up(DType dt, const void* dact, const void* gate, void* dup, std::int64_t n, cudaStream_t s);
void swiglu_backward_gate(DType dt, const void* dact, const void* gate, const void* up, void* dgate, std::int64_t n,
                          cudaStream_t s);
void gelu_backward(DType dt, const void* dact, const void* pre, void* dpre, std::int64_t n, cudaStream_t s);

// head_loss.cu. Cross-entropy in fp32 over logits [rows, vocab]: lse[r], token_loss[r] = lse - logit[target],
// loss = mean of token_loss (one deterministic reduction).
void cross_entropy_forward(DType dt, const void* logits, const std::int32_t* targets, float* lse, float* token_loss,
                           float* loss, std::int64_t rows, std::int64_t vocab, cudaStream_t s);
// logits <- d(loss * loss_scale)/d(logits) = (softmax - onehot) * loss_scale / rows, in place.
void cross_entropy_backward(DType dt, void* logits, const std::int32_t* targets, const float* lse,
                            std::int64_t rows, std::int64_t vocab, float loss_scale, cudaStream_t s);

}  // namespace zrun::model
