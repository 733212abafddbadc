// Double-precision CPU reference of the transformer zrun's model computes, written independently of the
// CUDA code from the textbook definitions: token (+ position) embedding, pre-norm layers (LayerNorm with
// bias or RMSNorm), causal grouped-query softmax attention, SwiGLU or tanh-GeLU MLP, final norm, tied or
// untied head, mean cross-entropy; and its backward by hand. Parameters are keyed by full tensor name.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/model/model_config.hpp"

namespace zrun::model::test {

using Vec = std::vector<double>;
using Params = std::map<std::string, Vec>;

class CpuReference {
 public:
  CpuReference(const ModelConfig& c, const Params& p) : c_(c), p_(p) {}

  // Returns the mean loss; logits() and grads() hold the rest afterwards.
  double run(const std::vector<std::int32_t>& tok, const std::vector<std::int32_t>& tgt) {
    const int64_t T = c_.tokens(), h = c_.hidden, V = c_.vocab, L = c_.layers;
    tok_ = tok;
    Vec x(T * h);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < h; ++k)
        x[t * h + k] = P("embed.tokens")[tok[t] * h + k] + (c_.max_positions ? P("embed.positions")[(t % c_.seq_len) * h + k] : 0);
    layers_.assign(L, {});
    for (int64_t l = 0; l < L; ++l) x = layer_forward(l, x, layers_[l]);
    xf_ = x;
    nf_ = norm_fwd("final.norm", xf_, statf_);
    logits_ = c_.tied_head ? mm(nf_, P("embed.tokens"), T, h, V, false, true) : mm(nf_, P("head.out"), T, h, V, false, false);
    double loss = 0;
    Vec dlogits(T * V);
    for (int64_t t = 0; t < T; ++t) {
      double mx = -1e300, s = 0;
      for (int64_t v = 0; v < V; ++v) mx = std::max(mx, logits_[t * V + v]);
      for (int64_t v = 0; v < V; ++v) s += std::exp(logits_[t * V + v] - mx);
      const double lse = mx + std::log(s);
      loss += lse - logits_[t * V + tgt[t]];
      for (int64_t v = 0; v < V; ++v) dlogits[t * V + v] = (std::exp(logits_[t * V + v] - lse) - (v == tgt[t])) / T;
    }
    loss /= T;
    // Backward.
    g_.clear();
    g_abs_.clear();
    for (const auto& [n, v] : p_) g_[n] = Vec(v.size(), 0.0);
    Vec dnf;
    if (c_.tied_head) {
      dnf = mm(dlogits, P("embed.tokens"), T, V, h, false, false);
      add(g_["embed.tokens"], mm(dlogits, nf_, V, T, h, true, false));
    } else {
      dnf = mm(dlogits, P("head.out"), T, V, h, false, true);
      add(g_["head.out"], mm(nf_, dlogits, h, T, V, true, false));
    }
    Vec dx = norm_bwd("final.norm", xf_, statf_, dnf);
    for (int64_t l = L - 1; l >= 0; --l) dx = layer_backward(l, layers_[l], dx);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < h; ++k) {
        g_["embed.tokens"][tok[t] * h + k] += dx[t * h + k];
        if (c_.max_positions) g_["embed.positions"][(t % c_.seq_len) * h + k] += dx[t * h + k];
      }
    return loss;
  }

  const Vec& logits() const { return logits_; }
  const Params& grads() const { return g_; }
  // Per bias element: the sum over tokens of |d(output)|, the size of the terms its gradient adds up.
  const Params& bias_grad_scale() const { return g_abs_; }

 private:
  struct NormStats { Vec mean, rstd; };
  struct LayerSaved {
    Vec x, n1, q, k, v, probs, attn, xm, n2, gate, up, act;
    NormStats s1, s2;
  };

  const Vec& P(const std::string& n) const { return p_.at(n); }
  static std::string lname(int64_t l, const std::string& n) { return "L" + std::to_string(l) + "." + n; }
  static void add(Vec& a, const Vec& b) { for (size_t i = 0; i < a.size(); ++i) a[i] += b[i]; }

  // C[m, n] = op(A) op(B), row-major, op(A) [m, k].
  static Vec mm(const Vec& A, const Vec& B, int64_t m, int64_t k, int64_t n, bool ta, bool tb) {
    Vec C(m * n, 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        const double a = ta ? A[p * m + i] : A[i * k + p];
        if (a == 0) continue;
        for (int64_t j = 0; j < n; ++j) C[i * n + j] += a * (tb ? B[j * k + p] : B[p * n + j]);
      }
    return C;
  }

  Vec linear(const std::string& n, const Vec& x, int64_t in, int64_t out) const {
    Vec y = mm(x, P(n), c_.tokens(), in, out, false, false);
    if (c_.bias)
      for (int64_t t = 0; t < c_.tokens(); ++t)
        for (int64_t o = 0; o < out; ++o) y[t * out + o] += P(n + ".bias")[o];
    return y;
  }
  // Accumulates dW, db; returns dX.
  Vec linear_bwd(const std::string& n, const Vec& x, const Vec& dy, int64_t in, int64_t out) {
    const int64_t T = c_.tokens();
    add(g_[n], mm(x, dy, in, T, out, true, false));
    if (c_.bias) {
      Vec& scale = g_abs_[n + ".bias"];
      scale.resize(out, 0.0);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < out; ++o) g_[n + ".bias"][o] += dy[t * out + o], scale[o] += std::abs(dy[t * out + o]);
    }
    return mm(dy, P(n), T, out, in, false, true);
  }

  Vec norm_fwd(const std::string& n, const Vec& x, NormStats& s) const {
    const int64_t T = c_.tokens(), h = c_.hidden;
    s.mean.assign(T, 0), s.rstd.assign(T, 0);
    Vec y(T * h);
    for (int64_t t = 0; t < T; ++t) {
      double mean = 0, var = 0;
      if (c_.bias) {
        for (int64_t k = 0; k < h; ++k) mean += x[t * h + k];
        mean /= h;
      }
      for (int64_t k = 0; k < h; ++k) var += (x[t * h + k] - mean) * (x[t * h + k] - mean);
      const double rstd = 1.0 / std::sqrt(var / h + c_.norm_eps);
      s.mean[t] = mean, s.rstd[t] = rstd;
      for (int64_t k = 0; k < h; ++k)
        y[t * h + k] = (x[t * h + k] - mean) * rstd * P(n + ".weight")[k] + (c_.bias ? P(n + ".bias")[k] : 0);
    }
    return y;
  }
  Vec norm_bwd(const std::string& n, const Vec& x, const NormStats& s, const Vec& dy) {
    const int64_t T = c_.tokens(), h = c_.hidden;
    Vec dx(T * h);
    for (int64_t t = 0; t < T; ++t) {
      double mg = 0, mgx = 0;
      for (int64_t k = 0; k < h; ++k) {
        const double xhat = (x[t * h + k] - s.mean[t]) * s.rstd[t], g = dy[t * h + k] * P(n + ".weight")[k];
        g_[n + ".weight"][k] += dy[t * h + k] * xhat;
        if (c_.bias) g_[n + ".bias"][k] += dy[t * h + k];
        mg += g, mgx += g * xhat;
      }
      mg = c_.bias ? mg / h : 0, mgx /= h;
      for (int64_t k = 0; k < h; ++k) {
        const double xhat = (x[t * h + k] - s.mean[t]) * s.rstd[t], g = dy[t * h + k] * P(n + ".weight")[k];
        dx[t * h + k] = s.rstd[t] * (g - mg - xhat * mgx);
      }
    }
    return dx;
  }

  static double silu(double x) { return x / (1 + std::exp(-x)); }
  static double gelu(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

  Vec layer_forward(int64_t l, const Vec& x, LayerSaved& S) {
    const int64_t T = c_.tokens(), h = c_.hidden, kv = c_.kv_dim(), f = c_.ffn;
    const int64_t B = c_.micro_batch, s = c_.seq_len, H = c_.heads, d = c_.head_dim, group = c_.heads / c_.kv_heads;
    S.x = x;
    S.n1 = norm_fwd(lname(l, "attn.norm"), x, S.s1);
    S.q = linear(lname(l, "attn.q"), S.n1, h, h);
    S.k = linear(lname(l, "attn.k"), S.n1, h, kv);
    S.v = linear(lname(l, "attn.v"), S.n1, h, kv);
    S.probs.assign(B * H * s * s, 0.0);
    S.attn.assign(T * h, 0.0);
    const double scale = 1.0 / std::sqrt(double(d));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t g = hh / group;
        for (int64_t i = 0; i < s; ++i) {
          double* pr = &S.probs[((b * H + hh) * s + i) * s];
          double mx = -1e300;
          for (int64_t j = 0; j <= i; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < d; ++e) dot += S.q[(b * s + i) * h + hh * d + e] * S.k[(b * s + j) * kv + g * d + e];
            pr[j] = dot * scale;
            mx = std::max(mx, pr[j]);
          }
          double sum = 0;
          for (int64_t j = 0; j <= i; ++j) sum += (pr[j] = std::exp(pr[j] - mx));
          for (int64_t j = 0; j <= i; ++j) pr[j] /= sum;
          for (int64_t j = 0; j <= i; ++j)
            for (int64_t e = 0; e < d; ++e) S.attn[(b * s + i) * h + hh * d + e] += pr[j] * S.v[(b * s + j) * kv + g * d + e];
        }
      }
    S.xm = linear(lname(l, "attn.o"), S.attn, h, h);
    add(S.xm, x);
    S.n2 = norm_fwd(lname(l, "mlp.norm"), S.xm, S.s2);
    S.up = linear(lname(l, "mlp.up"), S.n2, h, f);
    S.act.assign(T * f, 0.0);
    if (c_.gated) {
      S.gate = linear(lname(l, "mlp.gate"), S.n2, h, f);
      for (int64_t i = 0; i < T * f; ++i) S.act[i] = silu(S.gate[i]) * S.up[i];
    } else {
      for (int64_t i = 0; i < T * f; ++i) S.act[i] = gelu(S.up[i]);
    }
    Vec out = linear(lname(l, "mlp.down"), S.act, f, h);
    add(out, S.xm);
    return out;
  }

  Vec layer_backward(int64_t l, const LayerSaved& S, const Vec& dout) {
    const int64_t T = c_.tokens(), h = c_.hidden, kv = c_.kv_dim(), f = c_.ffn;
    const int64_t B = c_.micro_batch, s = c_.seq_len, H = c_.heads, d = c_.head_dim, group = c_.heads / c_.kv_heads;
    Vec dact = linear_bwd(lname(l, "mlp.down"), S.act, dout, f, h);
    Vec dn2;
    if (c_.gated) {
      Vec dup(T * f), dgate(T * f);
      for (int64_t i = 0; i < T * f; ++i) {
        const double g = S.gate[i], sg = 1 / (1 + std::exp(-g));
        dup[i] = dact[i] * silu(g);
        dgate[i] = dact[i] * S.up[i] * sg * (1 + g * (1 - sg));
      }
      dn2 = linear_bwd(lname(l, "mlp.up"), S.n2, dup, h, f);
      add(dn2, linear_bwd(lname(l, "mlp.gate"), S.n2, dgate, h, f));
    } else {
      Vec dpre(T * f);
      const double c = std::sqrt(2 / M_PI);
      for (int64_t i = 0; i < T * f; ++i) {
        const double x = S.up[i], th = std::tanh(c * (x + 0.044715 * x * x * x));
        dpre[i] = dact[i] * (0.5 * (1 + th) + 0.5 * x * (1 - th * th) * c * (1 + 3 * 0.044715 * x * x));
      }
      dn2 = linear_bwd(lname(l, "mlp.up"), S.n2, dpre, h, f);
    }
    Vec dxm = norm_bwd(lname(l, "mlp.norm"), S.xm, S.s2, dn2);
    add(dxm, dout);
    Vec dattn = linear_bwd(lname(l, "attn.o"), S.attn, dxm, h, h);
    Vec dq(T * h, 0.0), dk(T * kv, 0.0), dv(T * kv, 0.0);
    const double scale = 1.0 / std::sqrt(double(d));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t g = hh / group;
        for (int64_t i = 0; i < s; ++i) {
          const double* pr = &S.probs[((b * H + hh) * s + i) * s];
          Vec dp(i + 1);
          double dot = 0;
          for (int64_t j = 0; j <= i; ++j) {
            double v = 0;
            for (int64_t e = 0; e < d; ++e) {
              v += dattn[(b * s + i) * h + hh * d + e] * S.v[(b * s + j) * kv + g * d + e];
              dv[(b * s + j) * kv + g * d + e] += pr[j] * dattn[(b * s + i) * h + hh * d + e];
            }
            dp[j] = v;
            dot += pr[j] * v;
          }
          for (int64_t j = 0; j <= i; ++j) {
            const double ds = pr[j] * (dp[j] - dot) * scale;
            for (int64_t e = 0; e < d; ++e) {
              dq[(b * s + i) * h + hh * d + e] += ds * S.k[(b * s + j) * kv + g * d + e];
              dk[(b * s + j) * kv + g * d + e] += ds * S.q[(b * s + i) * h + hh * d + e];
            }
          }
        }
      }
    Vec dn1 = linear_bwd(lname(l, "attn.q"), S.n1, dq, h, h);
    add(dn1, linear_bwd(lname(l, "attn.k"), S.n1, dk, h, kv));
    add(dn1, linear_bwd(lname(l, "attn.v"), S.n1, dv, h, kv));
    Vec dx = norm_bwd(lname(l, "attn.norm"), S.x, S.s1, dn1);
    add(dx, dxm);
    return dx;
  }

  ModelConfig c_;
  Params p_;
  Params g_;
  Params g_abs_;
  std::vector<std::int32_t> tok_;
  std::vector<LayerSaved> layers_;
  Vec xf_, nf_, logits_;
  NormStats statf_;
};

}  // namespace zrun::model::test
