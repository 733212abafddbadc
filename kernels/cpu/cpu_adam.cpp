// CPU Adam/AdamW: OpenMP over fixed chunks; inside a chunk an AVX-512, AVX2+FMA+F16C or scalar body,
// picked at run time. API in kernels/cpu/cpu_adam.hpp.
#include "kernels/cpu/cpu_adam.hpp"

// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized inside _mm512_cvtps_ph.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <omp.h>
#include <cmath>
#include <stdexcept>
#include "kernels/half_convert.hpp"

namespace zk {
namespace {

struct Coeffs {
  float lr, beta1, beta2, eps, wd, grad_scale, step_size, inv_sqrt_bc2;
  bool adamw, bf16;
};

void body_scalar(float* p, float* m, float* v, const float* g, uint16_t* w, int64_t b, int64_t e, const Coeffs& c) {
  for (int64_t i = b; i < e; ++i) {
    float gi = g[i] * c.grad_scale;
    float pi = p[i];
    if (!c.adamw) gi = std::fma(c.wd, pi, gi);
    const float mi = std::fma(c.beta1, m[i], (1.0f - c.beta1) * gi);
    const float vi = std::fma(c.beta2, v[i], (1.0f - c.beta2) * gi * gi);
    const float denom = std::sqrt(vi) * c.inv_sqrt_bc2 + c.eps;
    if (c.adamw) pi -= c.lr * c.wd * pi;
    pi -= c.step_size * (mi / denom);
    p[i] = pi; m[i] = mi; v[i] = vi;
    if (w) w[i] = float_to_half16(pi, c.bf16);
  }
}

__attribute__((target("avx2,fma,f16c")))
void body_avx2(float* p, float* m, float* v, const float* g, uint16_t* w, int64_t b, int64_t e, const Coeffs& c) {
  const __m256 gs = _mm256_set1_ps(c.grad_scale), b1 = _mm256_set1_ps(c.beta1), b2 = _mm256_set1_ps(c.beta2);
  const __m256 omb1 = _mm256_set1_ps(1.0f - c.beta1), omb2 = _mm256_set1_ps(1.0f - c.beta2);
  const __m256 wd = _mm256_set1_ps(c.wd), eps = _mm256_set1_ps(c.eps), ibc2 = _mm256_set1_ps(c.inv_sqrt_bc2);
  const __m256 ss = _mm256_set1_ps(c.step_size), lrwd = _mm256_set1_ps(c.lr * c.wd);
  const __m256i round_bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
    __m256 pi = _mm256_loadu_ps(p + i);
    if (!c.adamw) gi = _mm256_fmadd_ps(wd, pi, gi);
    const __m256 mi = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m + i), _mm256_mul_ps(omb1, gi));
    const __m256 vi = _mm256_fmadd_ps(b2, _mm256_loadu_ps(v + i), _mm256_mul_ps(_mm256_mul_ps(omb2, gi), gi));
    const __m256 denom = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), ibc2), eps);
    if (c.adamw) pi = _mm256_sub_ps(pi, _mm256_mul_ps(lrwd, pi));
    pi = _mm256_sub_ps(pi, _mm256_mul_ps(ss, _mm256_div_ps(mi, denom)));
    _mm256_storeu_ps(p + i, pi); _mm256_storeu_ps(m + i, mi); _mm256_storeu_ps(v + i, vi);
    if (w) {
      __m128i h;
      if (c.bf16) {
        __m256i u = _mm256_castps_si256(pi);
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        u = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(round_bias, lsb)), 16);
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(u, u), 0xD8);
        h = _mm256_castsi256_si128(packed);
      } else {
        h = _mm256_cvtps_ph(pi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(w + i), h);
    }
  }
  body_scalar(p, m, v, g, w, i, e, c);
}

__attribute__((target("avx512f")))
void body_avx512(float* p, float* m, float* v, const float* g, uint16_t* w, int64_t b, int64_t e, const Coeffs& c) {
  const __m512 gs = _mm512_set1_ps(c.grad_scale), b1 = _mm512_set1_ps(c.beta1), b2 = _mm512_set1_ps(c.beta2);
  const __m512 omb1 = _mm512_set1_ps(1.0f - c.beta1), omb2 = _mm512_set1_ps(1.0f - c.beta2);
  const __m512 wd = _mm512_set1_ps(c.wd), eps = _mm512_set1_ps(c.eps), ibc2 = _mm512_set1_ps(c.inv_sqrt_bc2);
  const __m512 ss = _mm512_set1_ps(c.step_size), lrwd = _mm512_set1_ps(c.lr * c.wd);
  const __m512i round_bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  int64_t i = b;
  for (; i + 16 <= e; i += 16) {
    __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
    __m512 pi = _mm512_loadu_ps(p + i);
    if (!c.adamw) gi = _mm512_fmadd_ps(wd, pi, gi);
    const __m512 mi = _mm512_fmadd_ps(b1, _mm512_loadu_ps(m + i), _mm512_mul_ps(omb1, gi));
    const __m512 vi = _mm512_fmadd_ps(b2, _mm512_loadu_ps(v + i), _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
    const __m512 denom = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), ibc2), eps);
    if (c.adamw) pi = _mm512_sub_ps(pi, _mm512_mul_ps(lrwd, pi));
    pi = _mm512_sub_ps(pi, _mm512_mul_ps(ss, _mm512_div_ps(mi, denom)));
    _mm512_storeu_ps(p + i, pi); _mm512_storeu_ps(m + i, mi); _mm512_storeu_ps(v + i, vi);
    if (w) {
      __m256i h;
      if (c.bf16) {
        __m512i u = _mm512_castps_si512(pi);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
        u = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(round_bias, lsb)), 16);
        h = _mm512_cvtepi32_epi16(u);
      } else {
        h = _mm512_cvtps_ph(pi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(w + i), h);
    }
  }
  body_scalar(p, m, v, g, w, i, e, c);
}

using Body = void (*)(float*, float*, float*, const float*, uint16_t*, int64_t, int64_t, const Coeffs&);

}  // namespace

std::string to_string(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar: return "scalar";
    case SimdLevel::avx2: return "avx2";
    case SimdLevel::avx512: return "avx512";
  }
  return "?";
}

bool simd_level_supported(SimdLevel level) {
  __builtin_cpu_init();
  switch (level) {
    case SimdLevel::scalar: return true;
    case SimdLevel::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case SimdLevel::avx512: return __builtin_cpu_supports("avx512f");
  }
  return false;
}

SimdLevel best_simd_level() {
  if (simd_level_supported(SimdLevel::avx512)) return SimdLevel::avx512;
  if (simd_level_supported(SimdLevel::avx2)) return SimdLevel::avx2;
  return SimdLevel::scalar;
}

int cpu_adam_thread_count(int threads) {
  if (threads < 0) throw std::invalid_argument("cpu_adam_step: need threads >= 0 (0: OpenMP's default)");
  return threads > 0 ? threads : omp_get_max_threads();
}

void cpu_adam_step(float* params, float* exp_avg, float* exp_avg_sq, const float* grads, uint16_t* weights16,
                   Half16 weights_fmt, int64_t n, const AdamHyper& h, SimdLevel level, int threads) {
  if (n < 0 || h.step < 1) throw std::invalid_argument("cpu_adam_step: need n >= 0 and step >= 1");
  const int team = cpu_adam_thread_count(threads);
  if (!simd_level_supported(level))
    throw std::invalid_argument("cpu_adam_step: SIMD level " + to_string(level) + " not supported by this CPU");
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step));
  const Coeffs c{h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, h.grad_scale,
                 static_cast<float>(h.lr / bc1), static_cast<float>(1.0 / std::sqrt(bc2)), h.adamw,
                 weights_fmt == Half16::bf16};
  const Body body = level == SimdLevel::avx512 ? body_avx512 : level == SimdLevel::avx2 ? body_avx2 : body_scalar;
  constexpr int64_t kChunk = 16384;  // elements per OpenMP work item (a multiple of 16)
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) num_threads(team)
  for (int64_t ci = 0; ci < chunks; ++ci) {
    const int64_t b = ci * kChunk, e = b + kChunk < n ? b + kChunk : n;
    body(params, exp_avg, exp_avg_sq, grads, weights16, b, e, c);
  }
}

}  // namespace zk
