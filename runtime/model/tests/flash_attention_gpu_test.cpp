// zrun's flash attention kernels (flash_attention.cu) against a double-precision CPU reference of causal
// grouped-query attention, and against the eager path (attention.cu) in the same dtype: output, row
// log-sum-exp, and dq / dk / dv (dk, dv summed over a kv head's query heads), bf16 and fp16, head dim 64 and
// 128, grouped-query and multi-head, sequence lengths that are not a multiple of the tiles (64 / 128).
// Relative L2 error <= 2e-2 (the bf16 / fp16 limit of the model tests). Skipped with a message without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/tests/gpu_test_util.hpp"
#include "runtime/model/layers.hpp"
#include "runtime/model/tests/model_harness.hpp"

namespace zrun::model::test {
namespace {

using Vec = std::vector<double>;

struct Case {
  DType dt = DType::bf16;
  std::int64_t batch = 1, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
};

// Causal grouped-query attention in double: out, lse, and the gradients for d(out) = dout.
struct Reference {
  Vec out, lse, dq, dk, dv;
};
Reference reference(const Case& c, const Vec& q, const Vec& k, const Vec& v, const Vec& dout) {
  const std::int64_t B = c.batch, S = c.seq, H = c.heads, KV = c.kv_heads, d = c.head_dim, group = H / KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Reference r;
  r.out.assign(q.size(), 0), r.dq.assign(q.size(), 0), r.dk.assign(k.size(), 0), r.dv.assign(v.size(), 0);
  r.lse.assign(B * H * S, 0);
  auto qi = [&](std::int64_t b, std::int64_t i, std::int64_t h) { return ((b * S + i) * H + h) * d; };
  auto ki = [&](std::int64_t b, std::int64_t j, std::int64_t g) { return ((b * S + j) * KV + g) * d; };
  Vec p(S), dp(S);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t g = h / group;
      for (std::int64_t i = 0; i < S; ++i) {
        double mx = -1e300;
        for (std::int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (std::int64_t e = 0; e < d; ++e) s += q[qi(b, i, h) + e] * k[ki(b, j, g) + e];
          p[j] = s * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (std::int64_t j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        r.lse[(b * H + h) * S + i] = mx + std::log(sum);
        for (std::int64_t j = 0; j <= i; ++j) p[j] /= sum;
        for (std::int64_t j = 0; j <= i; ++j)
          for (std::int64_t e = 0; e < d; ++e) r.out[qi(b, i, h) + e] += p[j] * v[ki(b, j, g) + e];
        // Backward of row i: dp = dout v^T, ds = p (dp - sum p dp).
        double dot = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (std::int64_t e = 0; e < d; ++e) s += dout[qi(b, i, h) + e] * v[ki(b, j, g) + e];
          dp[j] = s;
          dot += p[j] * s;
        }
        for (std::int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - dot) * scale;
          for (std::int64_t e = 0; e < d; ++e) {
            r.dq[qi(b, i, h) + e] += ds * k[ki(b, j, g) + e];
            r.dk[ki(b, j, g) + e] += ds * q[qi(b, i, h) + e];
            r.dv[ki(b, j, g) + e] += p[j] * dout[qi(b, i, h) + e];
          }
        }
      }
    }
  return r;
}

double rel_l2(const std::vector<float>& got, const Vec& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) num += (got[i] - ref[i]) * (got[i] - ref[i]), den += ref[i] * ref[i];
  return std::sqrt(num / std::max(den, 1e-300));
}
Vec as_vec(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

// Random values rounded to the dtype, on the host (as double) and the device.
struct Tensor {
  Vec host;
  zk::test::DeviceBuffer<std::uint16_t> dev;
  Tensor(std::int64_t n, double stddev, DType dt, std::mt19937_64& rng) : host(n), dev(n) {
    std::normal_distribution<double> nd(0.0, stddev);
    std::vector<float> f(n);
    for (std::int64_t i = 0; i < n; ++i) host[i] = f[i] = round_to(static_cast<float>(nd(rng)), dt);
    dev.upload(to_half16(f, dt));
  }
};

std::vector<float> download(const zk::test::DeviceBuffer<std::uint16_t>& b, DType dt) {
  const std::vector<std::uint16_t> h = b.download();
  std::vector<float> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) out[i] = from_half16(h[i], dt);
  return out;
}

void check(const Case& c) {
  ZK_REQUIRE_GPU();
  const double tol = 2e-2;
  const AttentionShape a{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
  const std::int64_t nq = c.batch * c.seq * c.heads * c.head_dim, nkv = c.batch * c.seq * c.kv_heads * c.head_dim;
  std::mt19937_64 rng(c.seq * 131 + c.head_dim);
  // q twice the size of k: scores of standard deviation ~2, so the softmax is neither flat nor one-hot.
  Tensor q(nq, 2.0, c.dt, rng), k(nkv, 1.0, c.dt, rng), v(nkv, 1.0, c.dt, rng), dout(nq, 1.0, c.dt, rng);
  const Reference ref = reference(c, q.host, k.host, v.host, dout.host);

  // Flash: outputs start poisoned (NaN), so every element must be written.
  zk::test::DeviceBuffer<std::uint16_t> out(nq), dq(nq), dk(nkv), dv(nkv);
  zk::test::DeviceBuffer<float> lse(flash_attention_lse_floats(a)), delta(flash_attention_lse_floats(a)), acc(nq);
  cudaStream_t s = nullptr;
  flash_attention_forward(c.dt, a, q.dev.get(), k.dev.get(), v.dev.get(), out.get(), lse.get(), s);
  flash_attention_backward(c.dt, a, q.dev.get(), k.dev.get(), v.dev.get(), out.get(), lse.get(), dout.dev.get(),
                           delta.get(), acc.get(), dq.get(), dk.get(), dv.get(), s);
  ZK_CUDA_CHECK(cudaDeviceSynchronize());
  const auto f_out = download(out, c.dt), f_dq = download(dq, c.dt), f_dk = download(dk, c.dt),
             f_dv = download(dv, c.dt);
  const std::vector<float> f_lse = lse.download();

  // Eager, same inputs and dtype.
  Gemm g;
  zk::test::DeviceBuffer<std::uint16_t> probs(c.batch * c.heads * c.seq * c.seq), dprobs(probs.size()), e_out(nq),
      e_dq(nq), e_dk(nkv), e_dv(nkv);
  attention_forward(g, c.dt, a, q.dev.get(), k.dev.get(), v.dev.get(), probs.get(), e_out.get(), s);
  attention_backward(g, c.dt, a, q.dev.get(), k.dev.get(), v.dev.get(), probs.get(), dout.dev.get(), dprobs.get(),
                     e_dq.get(), e_dk.get(), e_dv.get(), s);
  ZK_CUDA_CHECK(cudaDeviceSynchronize());

  struct Row {
    const char* name;
    std::vector<float> flash;
    const Vec* ref;
    std::vector<float> eager;
  };
  const std::vector<Row> rows = {{"out", f_out, &ref.out, download(e_out, c.dt)},
                                 {"dq", f_dq, &ref.dq, download(e_dq, c.dt)},
                                 {"dk", f_dk, &ref.dk, download(e_dk, c.dt)},
                                 {"dv", f_dv, &ref.dv, download(e_dv, c.dt)}};
  std::printf("  [%s d%lld h%lld/kv%lld s%lld b%lld]", dtype_name(c.dt), static_cast<long long>(c.head_dim),
              static_cast<long long>(c.heads), static_cast<long long>(c.kv_heads), static_cast<long long>(c.seq),
              static_cast<long long>(c.batch));
  for (const Row& r : rows) {
    const double e_ref = rel_l2(r.flash, *r.ref), e_eager = rel_l2(r.flash, as_vec(r.eager)),
                 eager_ref = rel_l2(r.eager, *r.ref);
    std::printf(" %s %.1e (eager %.1e, flash-eager %.1e)", r.name, e_ref, eager_ref, e_eager);
    EXPECT_LE(e_ref, tol) << r.name << " against the double reference";
    EXPECT_LE(e_eager, tol) << r.name << " against the eager path";
  }
  const double lse_err = rel_l2(f_lse, ref.lse);
  std::printf(" lse %.1e\n", lse_err);
  EXPECT_LE(lse_err, 1e-3);  // fp32 statistics of bf16 / fp16 products
}

TEST(FlashAttentionGpu, Bf16HeadDim128GroupedQueryMatchesReferenceAndEager) {
  check({DType::bf16, 2, 200, 4, 2, 128});
}
TEST(FlashAttentionGpu, Bf16HeadDim64MultiHeadMatchesReferenceAndEager) { check({DType::bf16, 1, 333, 4, 4, 64}); }
TEST(FlashAttentionGpu, Fp16HeadDim128MultiHeadMatchesReferenceAndEager) { check({DType::fp16, 1, 130, 2, 2, 128}); }
TEST(FlashAttentionGpu, Fp16HeadDim64GroupedQueryMatchesReferenceAndEager) { check({DType::fp16, 2, 257, 8, 2, 64}); }
TEST(FlashAttentionGpu, ShortSequenceInsideOneTileMatches) { check({DType::bf16, 3, 17, 4, 1, 64}); }

TEST(FlashAttentionGpu, Fp32OrOtherHeadDimIsRefused) {
  const AttentionShape a{1, 16, 2, 2, 32};
  EXPECT_THROW(flash_attention_forward(DType::bf16, a, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);
  const AttentionShape b{1, 16, 2, 2, 64};
  EXPECT_THROW(flash_attention_forward(DType::fp32, b, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace zrun::model::test
