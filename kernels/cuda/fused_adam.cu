// Fused Adam/AdamW kernel and launcher (API in kernels/fused_adam.hpp): one read and one write of each
// state per parameter, all arithmetic in fp32.
#include <cmath>
#include "kernels/fused_adam.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_vec.cuh"
#include "kernels/cuda/launch_util.hpp"

namespace zk {
namespace {

struct AdamArgs {
  float lr, beta1, beta2, eps, wd, grad_scale;
  float step_size;        // lr / (1 - beta1^t)
  float inv_sqrt_bc2;     // 1 / sqrt(1 - beta2^t)
  bool adamw;
};

__device__ __forceinline__ void adam_one(float& p, float& m, float& v, float g, const AdamArgs& a) {
  g *= a.grad_scale;
  if (!a.adamw) g = fmaf(a.wd, p, g);
  m = fmaf(a.beta1, m, (1.0f - a.beta1) * g);
  v = fmaf(a.beta2, v, (1.0f - a.beta2) * g * g);
  const float denom = sqrtf(v) * a.inv_sqrt_bc2 + a.eps;
  if (a.adamw) p -= a.lr * a.wd * p;
  p -= a.step_size * (m / denom);
}

template <class GT, class WT, int V>
__global__ void fused_adam_kernel(float* __restrict__ p, float* __restrict__ m, float* __restrict__ v,
                                  const GT* __restrict__ g, WT* __restrict__ w, int64_t n, AdamArgs a) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (i >= n) return;
  if (i + V <= n) {
    auto pv = *reinterpret_cast<const dev::Vec<float, V>*>(p + i);
    auto mv = *reinterpret_cast<const dev::Vec<float, V>*>(m + i);
    auto vv = *reinterpret_cast<const dev::Vec<float, V>*>(v + i);
    float gv[V];
    dev::load_f<GT, V>(g + i, gv);
#pragma unroll
    for (int j = 0; j < V; ++j) adam_one(pv.v[j], mv.v[j], vv.v[j], gv[j], a);
    *reinterpret_cast<dev::Vec<float, V>*>(p + i) = pv;
    *reinterpret_cast<dev::Vec<float, V>*>(m + i) = mv;
    *reinterpret_cast<dev::Vec<float, V>*>(v + i) = vv;
    if (w != nullptr) dev::store_f<WT, V>(w + i, pv.v);
  } else {
    for (int64_t j = i; j < n; ++j) {
      float pj = p[j], mj = m[j], vj = v[j];
      adam_one(pj, mj, vj, dev::to_f<GT>(g[j]), a);
      p[j] = pj; m[j] = mj; v[j] = vj;
      if (w != nullptr) w[j] = dev::from_f<WT>(pj);
    }
  }
}

template <class GT, class WT>
void adam_typed(float* p, float* m, float* v, const void* g, void* w, int64_t n, const AdamArgs& a, cudaStream_t st) {
  constexpr int kThreads = 256;
  const auto* gt = static_cast<const GT*>(g);
  auto* wt = static_cast<WT*>(w);
  constexpr std::size_t ga = 4 * sizeof(GT), wa = 4 * sizeof(WT);  // a vector of 4 gradients / weights
  if (detail::aligned(p, 16) && detail::aligned(m, 16) && detail::aligned(v, 16) && detail::aligned(g, ga) &&
      detail::aligned(w, wa)) {
    fused_adam_kernel<GT, WT, 4><<<static_cast<unsigned>(detail::ceil_div(detail::ceil_div(n, 4), kThreads)), kThreads, 0, st>>>(
        p, m, v, gt, wt, n, a);
  } else {
    fused_adam_kernel<GT, WT, 1><<<static_cast<unsigned>(detail::ceil_div(n, kThreads)), kThreads, 0, st>>>(p, m, v, gt, wt, n, a);
  }
  ZK_CUDA_CHECK_LAUNCH();
}

AdamArgs adam_args(const AdamHyper& h) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step));
  return AdamArgs{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.grad_scale,
                  static_cast<float>(h.lr / bc1), static_cast<float>(1.0 / std::sqrt(bc2)), h.adamw};
}

}  // namespace

void fused_adam(float* master, float* exp_avg, float* exp_avg_sq, const void* grad, Half16 grad_fmt,
                void* weights_out, Half16 weights_fmt, int64_t n, const AdamHyper& h, StreamHandle stream) {
  detail::require(n >= 0 && h.step >= 1, "fused_adam: need n >= 0 and step >= 1");
  if (n == 0) return;
  const AdamArgs a = adam_args(h);
  const auto st = detail::as_stream(stream);
  const bool gb = grad_fmt == Half16::bf16, wb = weights_fmt == Half16::bf16;
  if (gb && wb) adam_typed<__nv_bfloat16, __nv_bfloat16>(master, exp_avg, exp_avg_sq, grad, weights_out, n, a, st);
  else if (gb) adam_typed<__nv_bfloat16, __half>(master, exp_avg, exp_avg_sq, grad, weights_out, n, a, st);
  else if (wb) adam_typed<__half, __nv_bfloat16>(master, exp_avg, exp_avg_sq, grad, weights_out, n, a, st);
  else adam_typed<__half, __half>(master, exp_avg, exp_avg_sq, grad, weights_out, n, a, st);
}

void fused_adam_fp32(float* master, float* exp_avg, float* exp_avg_sq, const float* grad, float* weights_out,
                     int64_t n, const AdamHyper& h, StreamHandle stream) {
  detail::require(n >= 0 && h.step >= 1, "fused_adam_fp32: need n >= 0 and step >= 1");
  if (n == 0) return;
  adam_typed<float, float>(master, exp_avg, exp_avg_sq, grad, weights_out, n, adam_args(h), detail::as_stream(stream));
}

}  // namespace zk
