#include "runtime/model/model.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "runtime/model/layers.hpp"

namespace zrun::model {

namespace {
const void* opt(const UnitParams& p, std::size_t i) { return i < p.size() ? p[i] : nullptr; }
void* opt(const UnitGrads& g, std::size_t i) { return i < g.size() ? g[i] : nullptr; }
}  // namespace

Model::Model(const ModelConfig& c, std::vector<zsim::FetchUnit> units)
    : cfg_(c), layout_(activation_layout(c)), units_(std::move(units)) {
  for (const auto& u : units_) info_.push_back({unit_ref(u.name)});
  gemm_ = std::make_unique<Gemm>();
  partials_floats_ = 2 * column_partials_floats(cfg_.tokens(), std::max({cfg_.hidden, cfg_.ffn, cfg_.kv_dim()}));
  ZK_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&partials_), partials_floats_ * sizeof(float)));
  embed_scratch_bytes_ = embedding_backward_scratch_bytes(cfg_.tokens());
  ZK_CUDA_CHECK(cudaMalloc(&embed_scratch_, embed_scratch_bytes_));
}

Model::~Model() {
  cudaFree(embed_scratch_);
  cudaFree(partials_);
}

std::int64_t Model::scratch_bytes() const {
  return static_cast<std::int64_t>(gemm_->workspace_bytes()) + partials_floats_ * 4 + embed_scratch_bytes_;
}

char* Model::layer_ptr(const Activations& a, int l, std::int64_t off) const {
  if (off < layout_.layer.work_base || !cfg_.checkpointing) return static_cast<char*>(a.layer.at(l)) + off;
  return static_cast<char*>(a.work) + (off - layout_.layer.work_base);
}
char* Model::head_ptr(const Activations& a, std::int64_t off) const { return static_cast<char*>(a.head) + off; }
char* Model::grad_ptr(const Activations& a, std::int64_t off) const { return static_cast<char*>(a.grad) + off; }

void* Model::layer_output(const Activations& a, int l) const {
  return l + 1 < cfg_.layers ? layer_ptr(a, l + 1, layout_.layer.x_in) : head_ptr(a, layout_.head.x_final);
}

float* Model::loss(const Activations& a) const { return reinterpret_cast<float*>(head_ptr(a, layout_.head.loss)); }
void* Model::logits(const Activations& a) const { return head_ptr(a, layout_.head.logits); }

void Model::forward_unit(int u, const UnitParams& p, const Activations& a, cudaStream_t s) {
  const UnitRef& r = info_.at(u).ref;
  const std::int64_t T = cfg_.tokens(), h = cfg_.hidden, V = cfg_.vocab;
  const DType dt = cfg_.dtype;
  const HeadLayout& H = layout_.head;
  switch (r.kind) {
    case UnitKind::embedding:
      embedding_forward(dt, a.tokens, p.at(0), cfg_.max_positions > 0 ? p.at(1) : nullptr, layer_output(a, -1), T,
                        cfg_.seq_len, h, s);
      return;
    case UnitKind::final_norm:
      norm_forward(dt, cfg_.bias, head_ptr(a, H.x_final), p.at(0), opt(p, 1), head_ptr(a, H.nf),
                   reinterpret_cast<float*>(head_ptr(a, H.statsf)), T, h, cfg_.norm_eps, s);
      return;
    case UnitKind::head: {
      void* logits = head_ptr(a, H.logits);
      if (cfg_.tied_head) {
        GemmCall g;  // logits^T (V x T) = E (V x h) nf^T (h x T); E [V, h] row-major is (h x V) column-major
        g.trans_a = true;
        g.m = V, g.n = T, g.k = h;
        g.a = p.at(0), g.lda = h;
        g.b = head_ptr(a, H.nf), g.ldb = h;
        g.d = logits, g.ldd = V;
        gemm_->run(g, dt, s);
      } else {
        linear_forward(*gemm_, dt, head_ptr(a, H.nf), p.at(0), nullptr, nullptr, logits, T, h, V, s);
      }
      cross_entropy_forward(dt, logits, a.targets, reinterpret_cast<float*>(head_ptr(a, H.lse)),
                            reinterpret_cast<float*>(head_ptr(a, H.token_loss)), loss(a), T, V, s);
      return;
    }
    default:
      forward_layer_unit(r, p, a, false, s);
  }
}

void Model::forward_layer_unit(const UnitRef& r, const UnitParams& p, const Activations& a, bool recompute,
                               cudaStream_t s) {
  const std::int64_t T = cfg_.tokens(), h = cfg_.hidden, kv = cfg_.kv_dim(), f = cfg_.ffn;
  const DType dt = cfg_.dtype;
  const LayerLayout& L = layout_.layer;
  const int l = r.layer;
  auto at = [&](std::int64_t off) { return layer_ptr(a, l, off); };
  auto stats = [&](std::int64_t off) { return reinterpret_cast<float*>(at(off)); };
  switch (r.kind) {
    case UnitKind::attn_norm:
      norm_forward(dt, cfg_.bias, at(L.x_in), p.at(0), opt(p, 1), at(L.n1), stats(L.stats1), T, h, cfg_.norm_eps, s);
      return;
    case UnitKind::attn_q: linear_forward(*gemm_, dt, at(L.n1), p.at(0), opt(p, 1), nullptr, at(L.q), T, h, h, s); return;
    case UnitKind::attn_k: linear_forward(*gemm_, dt, at(L.n1), p.at(0), opt(p, 1), nullptr, at(L.k), T, h, kv, s); return;
    case UnitKind::attn_v: linear_forward(*gemm_, dt, at(L.n1), p.at(0), opt(p, 1), nullptr, at(L.v), T, h, kv, s); return;
    case UnitKind::attn_o: {
      const AttentionShape as{cfg_.micro_batch, cfg_.seq_len, cfg_.heads, cfg_.kv_heads, cfg_.head_dim};
      if (cfg_.flash_attention)
        flash_attention_forward(dt, as, at(L.q), at(L.k), at(L.v), at(L.attn), stats(L.lse), s);
      else
        attention_forward(*gemm_, dt, as, at(L.q), at(L.k), at(L.v), at(L.probs), at(L.attn), s);
      linear_forward(*gemm_, dt, at(L.attn), p.at(0), opt(p, 1), at(L.x_in), at(L.x_mid), T, h, h, s);
      return;
    }
    case UnitKind::mlp_norm:
      norm_forward(dt, cfg_.bias, at(L.x_mid), p.at(0), opt(p, 1), at(L.n2), stats(L.stats2), T, h, cfg_.norm_eps, s);
      return;
    case UnitKind::mlp_gate: linear_forward(*gemm_, dt, at(L.n2), p.at(0), opt(p, 1), nullptr, at(L.gate), T, h, f, s); return;
    case UnitKind::mlp_up:
      linear_forward(*gemm_, dt, at(L.n2), p.at(0), opt(p, 1), nullptr, at(L.up), T, h, f, s);
      if (cfg_.gated)
        swiglu_forward(dt, at(L.gate), at(L.up), at(L.act), T * f, s);
      else
        gelu_forward(dt, at(L.up), at(L.act), T * f, s);
      return;
    case UnitKind::mlp_down:
      if (!recompute)  // the output is the next layer's input, which that layer kept
        linear_forward(*gemm_, dt, at(L.act), p.at(0), opt(p, 1), at(L.x_mid), layer_output(a, l), T, f, h, s);
      return;
    default: throw std::logic_error("model: not a layer unit");
  }
}

void Model::recompute_layer(int l, const std::vector<UnitParams>& params, const Activations& a, cudaStream_t s) {
  std::size_t k = 0;
  for (const UnitInfo& in : info_) {
    if (in.ref.layer != l) continue;
    if (k >= params.size())
      throw std::invalid_argument("model: recompute of layer " + std::to_string(l) + " got too few unit params");
    forward_layer_unit(in.ref, params[k++], a, true, s);
  }
}

void Model::backward_unit(int u, const UnitParams& p, const UnitGrads& g, const Activations& a, cudaStream_t s) {
  const UnitRef& r = info_.at(u).ref;
  const std::int64_t T = cfg_.tokens(), h = cfg_.hidden, V = cfg_.vocab;
  const DType dt = cfg_.dtype;
  const HeadLayout& H = layout_.head;
  const GradLayout& G = layout_.grad;
  switch (r.kind) {
    case UnitKind::embedding:
      embedding_backward(dt, a.tokens, grad_ptr(a, G.dres), g.at(0), cfg_.max_positions > 0 ? g.at(1) : nullptr, T,
                         cfg_.seq_len, h, embed_scratch_, s);
      return;
    case UnitKind::final_norm:
      norm_backward(dt, cfg_.bias, head_ptr(a, H.x_final), p.at(0), reinterpret_cast<float*>(head_ptr(a, H.statsf)),
                    grad_ptr(a, G.dn), grad_ptr(a, G.dres), false, g.at(0), opt(g, 1), T, h, partials_, s);
      return;
    case UnitKind::head: {
      void* dlogits = head_ptr(a, H.logits);
      cross_entropy_backward(dt, dlogits, a.targets, reinterpret_cast<float*>(head_ptr(a, H.lse)), T, V, loss_scale_, s);
      if (cfg_.tied_head) {
        GemmCall dx;  // d(nf)^T (h x T) = E^T (h x V) dlogits^T (V x T)
        dx.m = h, dx.n = T, dx.k = V;
        dx.a = p.at(0), dx.lda = h;
        dx.b = dlogits, dx.ldb = V;
        dx.d = grad_ptr(a, G.dn), dx.ldd = h;
        gemm_->run(dx, dt, s);
        GemmCall dw;  // dE^T (h x V) += nf^T (h x T) dlogits (T x V)
        dw.trans_b = true;
        dw.m = h, dw.n = V, dw.k = T, dw.beta = 1.0f;
        dw.a = head_ptr(a, H.nf), dw.lda = h;
        dw.b = dlogits, dw.ldb = V;
        dw.d = g.at(0), dw.ldd = h;
        gemm_->run(dw, dt, s);
      } else {
        linear_backward_input(*gemm_, dt, dlogits, p.at(0), grad_ptr(a, G.dn), 0.0f, T, h, V, s);
        linear_backward_weight(*gemm_, dt, head_ptr(a, H.nf), dlogits, g.at(0), T, h, V, s);
      }
      return;
    }
    default:
      backward_layer_unit(r, p, g, a, s);
  }
}

void Model::backward_layer_unit(const UnitRef& r, const UnitParams& p, const UnitGrads& g, const Activations& a,
                                cudaStream_t s) {
  const std::int64_t T = cfg_.tokens(), h = cfg_.hidden, kv = cfg_.kv_dim(), f = cfg_.ffn;
  const DType dt = cfg_.dtype;
  const LayerLayout& L = layout_.layer;
  const GradLayout& G = layout_.grad;
  const int l = r.layer;
  auto at = [&](std::int64_t off) { return layer_ptr(a, l, off); };
  auto gr = [&](std::int64_t off) { return grad_ptr(a, off); };
  auto stats = [&](std::int64_t off) { return reinterpret_cast<const float*>(at(off)); };
  // A linear unit's backward: dX (+)= dY W^T into the norm output's gradient, dW += X^T dY, db += colsum(dY).
  auto linear_bwd = [&](const void* x, void* dy, void* dx, float beta, std::int64_t in, std::int64_t out) {
    linear_backward_input(*gemm_, dt, dy, p.at(0), dx, beta, T, in, out, s);
    linear_backward_weight(*gemm_, dt, x, dy, g.at(0), T, in, out, s);
    if (void* db = opt(g, 1)) bias_backward(dt, dy, db, T, out, partials_, s);
  };
  switch (r.kind) {
    case UnitKind::mlp_down:
      linear_bwd(at(L.act), gr(G.dres), gr(G.dact), 0.0f, f, h);
      return;
    case UnitKind::mlp_up:  // first of the MLP's input projections in backward: writes d(n2)
      if (cfg_.gated)
        swiglu_backward_up(dt, gr(G.dact), at(L.gate), gr(G.dtmp), T * f, s);
      else
        gelu_backward(dt, gr(G.dact), at(L.up), gr(G.dtmp), T * f, s);
      linear_bwd(at(L.n2), gr(G.dtmp), gr(G.dn), 0.0f, h, f);
      return;
    case UnitKind::mlp_gate:  // adds to d(n2)
      swiglu_backward_gate(dt, gr(G.dact), at(L.gate), at(L.up), gr(G.dtmp), T * f, s);
      linear_bwd(at(L.n2), gr(G.dtmp), gr(G.dn), 1.0f, h, f);
      return;
    case UnitKind::mlp_norm:
      norm_backward(dt, cfg_.bias, at(L.x_mid), p.at(0), stats(L.stats2), gr(G.dn), gr(G.dres), true, g.at(0),
                    opt(g, 1), T, h, partials_, s);
      return;
    case UnitKind::attn_o: {
      linear_bwd(at(L.attn), gr(G.dres), gr(G.dattn), 0.0f, h, h);
      const AttentionShape as{cfg_.micro_batch, cfg_.seq_len, cfg_.heads, cfg_.kv_heads, cfg_.head_dim};
      if (cfg_.flash_attention)
        flash_attention_backward(dt, as, at(L.q), at(L.k), at(L.v), at(L.attn), stats(L.lse), gr(G.dattn),
                                 reinterpret_cast<float*>(gr(G.delta)), reinterpret_cast<float*>(gr(G.dq_accum)),
                                 gr(G.dq), gr(G.dk), gr(G.dv), s);
      else
        attention_backward(*gemm_, dt, as, at(L.q), at(L.k), at(L.v), at(L.probs), gr(G.dattn), gr(G.dprobs),
                           gr(G.dq), gr(G.dk), gr(G.dv), s);
      return;
    }
    case UnitKind::attn_v: linear_bwd(at(L.n1), gr(G.dv), gr(G.dn), 0.0f, h, kv); return;  // first in backward
    case UnitKind::attn_k: linear_bwd(at(L.n1), gr(G.dk), gr(G.dn), 1.0f, h, kv); return;
    case UnitKind::attn_q: linear_bwd(at(L.n1), gr(G.dq), gr(G.dn), 1.0f, h, h); return;
    case UnitKind::attn_norm:
      norm_backward(dt, cfg_.bias, at(L.x_in), p.at(0), stats(L.stats1), gr(G.dn), gr(G.dres), true, g.at(0),
                    opt(g, 1), T, h, partials_, s);
      return;
    default: throw std::logic_error("model: not a layer unit");
  }
}

}  // namespace zrun::model
