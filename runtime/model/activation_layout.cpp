#include "runtime/model/activation_layout.hpp"

namespace zrun::model {

namespace {
constexpr std::int64_t kAlign = 256;
// Places `bytes` at the running offset (aligned) and returns where.
std::int64_t place(std::int64_t& at, std::int64_t bytes) {
  at = (at + kAlign - 1) / kAlign * kAlign;
  const std::int64_t here = at;
  at += bytes;
  return here;
}
std::int64_t aligned(std::int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
}  // namespace

ActivationLayout activation_layout(const ModelConfig& c) {
  const std::int64_t T = c.tokens(), h = c.hidden, kv = c.kv_dim(), f = c.ffn, es = c.elem_bytes();
  const std::int64_t scores = c.micro_batch * c.heads * c.seq_len * c.seq_len;
  ActivationLayout a;
  std::int64_t at = 0;
  LayerLayout& L = a.layer;
  L.x_in = place(at, T * h * es);
  at = aligned(at);
  L.work_base = at;
  L.n1 = place(at, T * h * es);
  L.stats1 = place(at, 2 * T * 4);
  L.q = place(at, T * h * es);
  L.k = place(at, T * kv * es);
  L.v = place(at, T * kv * es);
  const std::int64_t row_floats = c.micro_batch * c.heads * c.seq_len;  // one float per (batch, head, token)
  if (c.flash_attention)
    L.lse = place(at, row_floats * 4);
  else
    L.probs = place(at, scores * es);
  L.attn = place(at, T * h * es);
  L.x_mid = place(at, T * h * es);
  L.n2 = place(at, T * h * es);
  L.stats2 = place(at, 2 * T * 4);
  L.gate = c.gated ? place(at, T * f * es) : 0;
  L.up = place(at, T * f * es);
  L.act = place(at, T * f * es);
  L.end = aligned(at);

  at = 0;
  HeadLayout& H = a.head;
  H.x_final = place(at, T * h * es);
  H.nf = place(at, T * h * es);
  H.statsf = place(at, 2 * T * 4);
  H.logits = place(at, T * c.vocab * es);
  H.lse = place(at, T * 4);
  H.token_loss = place(at, T * 4);
  H.loss = place(at, 4);
  H.end = aligned(at);

  at = 0;
  GradLayout& G = a.grad;
  G.dres = place(at, T * h * es);
  G.dn = place(at, T * h * es);
  G.dattn = place(at, T * h * es);
  G.dq = place(at, T * h * es);
  G.dk = place(at, T * kv * es);
  G.dv = place(at, T * kv * es);
  if (c.flash_attention) {
    G.delta = place(at, row_floats * 4);
    G.dq_accum = place(at, T * h * 4);
  } else {
    G.dprobs = place(at, scores * es);
  }
  G.dact = place(at, T * f * es);
  G.dtmp = place(at, T * f * es);
  G.end = aligned(at);
  return a;
}

std::int64_t ActivationLayout::layer_bytes(bool checkpointing) const {
  return checkpointing ? layer.work_base : layer.end;
}

std::int64_t ActivationLayout::work_bytes() const { return layer.end - layer.work_base; }

zsim::ActivationBytes zsim_buffer_bytes(const ActivationLayout& a) {
  zsim::ActivationBytes b;
  b.per_layer_no_recompute = a.layer_bytes(false);
  b.per_layer_checkpoint = a.layer_bytes(true);
  b.per_layer_work_bytes = a.work_bytes();
  b.backward_grad_bytes = a.grad_bytes();
  b.head_bytes = a.head_bytes();
  return b;
}

}  // namespace zrun::model
