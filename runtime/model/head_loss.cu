// Cross-entropy over the logits in fp32: per row log-sum-exp and loss, a single-block mean (deterministic),
// and the backward that overwrites the logits with d(loss)/d(logits) = (softmax - onehot) * scale / rows.
#include "runtime/model/device_types.cuh"
#include "runtime/model/layers.hpp"

namespace zrun::model {

namespace {
template <class T>
__global__ void ce_rows(const T* logits, const std::int32_t* targets, float* lse, float* token_loss,
                        std::int64_t vocab) {
  const std::int64_t r = blockIdx.x;
  const T* lr = logits + r * vocab;
  float mx = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < vocab; c += blockDim.x) mx = fmaxf(mx, to_f(lr[c]));
  mx = block_max(mx);
  float sum = 0.0f;
  for (std::int64_t c = threadIdx.x; c < vocab; c += blockDim.x) sum += expf(to_f(lr[c]) - mx);
  sum = block_sum(sum);
  if (threadIdx.x == 0) {
    const float l = mx + logf(sum);
    lse[r] = l;
    token_loss[r] = l - to_f(lr[targets[r]]);
  }
}

__global__ void mean_of(const float* x, float* out, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s / n;
}

template <class T>
__global__ void ce_backward(T* logits, const std::int32_t* targets, const float* lse, std::int64_t vocab,
                            float scale) {
  const std::int64_t r = blockIdx.x;
  T* lr = logits + r * vocab;
  const float l = lse[r];
  const std::int32_t t = targets[r];
  for (std::int64_t c = threadIdx.x; c < vocab; c += blockDim.x) {
    const float p = expf(to_f(lr[c]) - l);
    lr[c] = from_f<T>((p - (c == t ? 1.0f : 0.0f)) * scale);
  }
}
}  // namespace

void cross_entropy_forward(DType dt, const void* logits, const std::int32_t* targets, float* lse, float* token_loss,
                           float* loss, std::int64_t rows, std::int64_t vocab, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    ce_rows<T><<<static_cast<unsigned>(rows), 256, 0, s>>>(static_cast<const T*>(logits), targets, lse, token_loss,
                                                           vocab);
  });
  ZK_CUDA_CHECK_LAUNCH();
  mean_of<<<1, 1024, 0, s>>>(token_loss, loss, rows);
  ZK_CUDA_CHECK_LAUNCH();
}

void cross_entropy_backward(DType dt, void* logits, const std::int32_t* targets, const float* lse, std::int64_t rows,
                            std::int64_t vocab, float loss_scale, cudaStream_t s) {
  dispatch_dtype(dt, [&](auto z) {
    using T = decltype(z);
    ce_backward<T><<<static_cast<unsigned>(rows), 256, 0, s>>>(static_cast<T*>(logits), targets, lse, vocab,
                                                               loss_scale / static_cast<float>(rows));
  });
  ZK_CUDA_CHECK_LAUNCH();
}

}  // namespace zrun::model
