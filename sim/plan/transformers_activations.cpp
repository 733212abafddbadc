#include "sim/plan/transformers_activations.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace zsim {

void BytesBreakdown::add(std::string name, Bytes bytes) {
  if (bytes == 0) return;
  total += bytes;
  parts.push_back({std::move(name), bytes});
}

Bytes BytesBreakdown::of(const std::string& name) const {
  for (const auto& p : parts)
    if (p.name == name) return p.bytes;
  return 0;
}

HfFamily hf_family(const ModelSpec& m) { return m.mlp == MlpKind::gated ? HfFamily::llama : HfFamily::gpt2; }

namespace {

// A backward pass as the autograd engine runs it: tensors allocated and freed in order. `have` registers what is
// already there when the pass starts; the peak is the most the pass holds above that, with the live parts then.
class Tape {
 public:
  void have(const std::string& name, Bytes b) {
    if (b != 0) start_[name] = b;
  }
  void alloc(const std::string& name, Bytes b) {
    if (b == 0) return;
    live_[name] += b;
    cur_ += b;
    if (cur_ > peak_.total) snapshot();
  }
  void free(const std::string& name) {
    if (auto it = live_.find(name); it != live_.end()) {
      cur_ -= it->second;
      live_.erase(it);
    } else if (auto st = start_.find(name); st != start_.end()) {
      cur_ -= st->second;
      freed_.push_back(*st);
      start_.erase(st);
    }
  }
  const BytesBreakdown& peak() const { return peak_; }

 private:
  void snapshot() {
    peak_ = {};
    for (const auto& [n, b] : live_) peak_.add(n, b);
    for (const auto& [n, b] : freed_) peak_.add("freed: " + n, -b);
    peak_.total = cur_;
  }
  std::map<std::string, Bytes> start_, live_;
  std::vector<std::pair<std::string, Bytes>> freed_;
  Bytes cur_ = 0;
  BytesBreakdown peak_;
};

struct Dims {
  Bytes T, s, b, e, h, f, a, kv, d, qd, kvd, V;
  ArchSpec arch;
  Bytes bas2() const { return b * a * s * s; }
};

// The saved tensors' names, shared by the forward inventory and the backward tapes.
namespace n {
const std::string kLayerGrad = "gradient of the layer output (incoming)";
std::string norm_x32(const std::string& p) { return p + ": fp32 copy of its input (pow, mul)"; }
std::string norm_rstd(const std::string& p) { return p + ": rsqrt of the variance (fp32)"; }
std::string norm_y(const std::string& p) { return p + ": normalized input in the training dtype (weight *)"; }
std::string ln_in(const std::string& p) { return p + ": input"; }
std::string ln_stats(const std::string& p) { return p + ": mean and rstd (fp32)"; }
const std::string kAttnIn = "q/k/v projections' input (norm output)";
const std::string kQ = "q after RoPE";
const std::string kK = "k after RoPE";
const std::string kV = "v (v_proj output)";
const std::string kKrep = "k repeated to all heads (repeat_kv)";
const std::string kVrep = "v repeated to all heads (repeat_kv)";
const std::string kQkv = "qkv (c_attn output; q, k, v are its views)";
const std::string kSdpaOut = "sdpa output = o_proj input";
const std::string kLse = "sdpa log-sum-exp (fp32, per head and row)";
const std::string kP32 = "softmax output (fp32)";
const std::string kP16 = "softmax output (training dtype)";
const std::string kProbs = "probabilities in the training dtype (matmul with v)";
const std::string kPmask = "attention dropout mask (bool)";
const std::string kPdrop = "probabilities after dropout (matmul with v)";
const std::string kOin = "attention output transposed copy = o_proj input";
const std::string kResidMaskA = "attention residual dropout mask (bool)";
const std::string kResidMaskM = "MLP residual dropout mask (bool)";
const std::string kMlpIn = "MLP input (norm output)";
const std::string kGate = "gate_proj output (SiLU input)";
const std::string kSilu = "SiLU output";
const std::string kUp = "up_proj output";
const std::string kProd = "SiLU * up (down_proj input)";
const std::string kFcOut = "c_fc output (gelu input, pow)";
const std::string kTanh = "tanh(...) (tanh output)";
const std::string kHalfX = "0.5 * x (mul)";
const std::string kOnePlus = "1 + tanh(...) (mul)";
const std::string kAct = "gelu output (c_proj input)";
}  // namespace n

bool eager(const ModelSpec& m) { return m.attention == Attention::eager; }

// ---- forward inventories ----

// What one norm saves for its backward (transformers 5.17's norm classes), `width` elements a row, `rows` rows a
// token (the heads of a per-head q/k norm, else 1), `weight` elements in its weight:
//   rms (LlamaRMSNorm): the fp32 input (pow, mul), the rsqrt (fp32), the normalized input cast back (weight *);
//   rms_weight_fp32 (Olmo2RMSNorm): the fp32 input, the rsqrt, the normalized input in fp32 (weight * before the cast);
//   rms_gemma (GemmaRMSNorm): the fp32 input, the rsqrt, (1 + weight) in fp32, the normalized input in fp32;
//   layer (nn.LayerNorm): its input, mean and rstd (fp32); the input not counted where another norm saved it;
//   layer_no_bias (CohereLayerNorm): the fp32 input, its variance, the centred and normalized inputs (fp32), weight.
void norm_saved(BytesBreakdown& out, const Dims& D, NormKind kind, const std::string& p, Bytes width, Bytes rows,
                Bytes weight, bool input_saved_elsewhere = false) {
  switch (kind) {
    case NormKind::rms:
      out.add(n::norm_x32(p), 4 * width * D.T);
      out.add(n::norm_rstd(p), 4 * rows * D.T);
      out.add(n::norm_y(p), D.e * width * D.T);
      return;
    case NormKind::rms_weight_fp32:
      out.add(n::norm_x32(p), 4 * width * D.T);
      out.add(n::norm_rstd(p), 4 * rows * D.T);
      out.add(p + ": normalized input (fp32, weight *)", 4 * width * D.T);
      return;
    case NormKind::rms_gemma:
      out.add(n::norm_x32(p), 4 * width * D.T);
      out.add(n::norm_rstd(p), 4 * rows * D.T);
      out.add(p + ": 1 + weight (fp32)", 4 * weight);
      out.add(p + ": normalized input (fp32, (1 + weight) *)", 4 * width * D.T);
      return;
    case NormKind::layer:
      if (!input_saved_elsewhere) out.add(n::ln_in(p), D.e * width * D.T);
      out.add(n::ln_stats(p), 8 * rows * D.T);
      return;
    case NormKind::layer_no_bias:
      out.add(n::norm_x32(p), 4 * width * D.T);
      out.add(p + ": variance (fp32)", 4 * rows * D.T);
      out.add(p + ": centred input (fp32)", 4 * width * D.T);
      out.add(p + ": normalized input (fp32, weight *)", 4 * width * D.T);
      out.add(p + ": weight (fp32)", 4 * weight);
      return;
  }
}

void hidden_norm(BytesBreakdown& out, const Dims& D, const std::string& p, bool input_saved_elsewhere = false) {
  norm_saved(out, D, D.arch.norm, p, D.h, 1, D.h, input_saved_elsewhere);
}

// q and k normalized after their projections: per head (Qwen3, Gemma-3: head_dim wide, a rstd per head) or over the
// full width (OLMo-2).
void qk_norms_saved(BytesBreakdown& out, const Dims& D) {
  if (D.arch.qk_norm == QkNorm::none) return;
  const bool per_head = D.arch.qk_norm == QkNorm::per_head;
  norm_saved(out, D, D.arch.norm, "q_norm", D.qd, per_head ? D.a : 1, per_head ? D.d : D.qd);
  norm_saved(out, D, D.arch.norm, "k_norm", D.kvd, per_head ? D.kv : 1, per_head ? D.d : D.kvd);
}

// The attention's saved tensors from the projections' input to o_proj's input. sdpa (no mask: enable_gqa keeps k and
// v at the kv heads, sdpa_attention.py): q and k after RoPE, v (a view of the fused projection's output where there
// is one, whose whole storage stays), the output and the fp32 log-sum-exp; with a fused projection and RoPE, o_proj
// saves a copy of the transposed output. Eager: q, k and v at all heads, the fp32 softmax and its copy in the training
// dtype (Gemma-2 also its soft-capping's tanh), o_proj's input.
void attention_saved(BytesBreakdown& s, const ModelSpec& m, const Dims& D, bool rope) {
  const bool fused = D.arch.fused_qkv;
  const Bytes qkv = D.e * (D.qd + 2 * D.kvd) * D.T;
  if (eager(m) && fused && !rope) {  // GPT-2: q, k, v views of c_attn's output; its softmax in the training dtype
    s.add(n::kQkv, qkv);
    s.add(n::kP16, D.e * D.bas2());
    if (m.attention_dropout > 0) {
      s.add(n::kPmask, D.bas2());
      s.add(n::kPdrop, D.e * D.bas2());
    }
    s.add(n::kOin, D.e * D.qd * D.T);
    return;
  }
  if (!eager(m)) {
    if (fused) s.add(n::kQkv, qkv);
    if (!fused || rope) {
      s.add(n::kQ, D.e * D.qd * D.T);
      s.add(n::kK, D.e * D.kvd * D.T);
    }
    if (!fused) s.add(n::kV, D.e * D.kvd * D.T);
    s.add(n::kSdpaOut, D.e * D.qd * D.T);
    s.add(n::kLse, 4 * D.a * D.T);
    if (fused && rope) s.add(n::kOin, D.e * D.qd * D.T);
    return;
  }
  const bool grouped = D.kv < D.a;
  s.add(n::kQ, D.e * D.qd * D.T);
  s.add(grouped ? n::kKrep : n::kK, D.e * (grouped ? D.qd : D.kvd) * D.T);
  // v: a view of the fused output at batch 1 (its storage stays); else a copy at all heads
  if (fused && D.b == 1) s.add(n::kQkv, qkv);
  else s.add(grouped ? n::kVrep : n::kV, D.e * (grouped ? D.qd : D.kvd) * D.T);
  s.add(n::kP32, 4 * D.bas2());
  if (D.arch.attn_softcapping) s.add("soft-capped scores' tanh (training dtype)", D.e * D.bas2());
  if (m.attention_dropout > 0) {
    s.add(n::kPmask, D.bas2());
    s.add(n::kPdrop, D.e * D.bas2());
  } else if (D.e != 4) {
    s.add(n::kProbs, D.e * D.bas2());
  }
  s.add(n::kOin, D.e * D.qd * D.T);
}

// A mixture of experts' MLP under transformers 5.17's default experts implementation (grouped_mm, integrations/moe.py:
// the routed rows, tokens x experts_per_token of them, sorted by expert): the router's input, its fp32 softmax, the
// top-k indices, weights (and their sum where renormalized); the rows' order, tokens and mask, the rows per expert; the
// rows' gathered input, the experts' gate_up output (its whole storage: act and up are views), the activation's output
// and its product with up, the rows' weights (Mixtral fp32, Qwen3-MoE the dtype), the experts' output, the scatter's
// indices. Balanced or not, every routed row is saved once: the sizes follow the rows, not the busiest expert.
void moe_saved(BytesBreakdown& s, const Dims& D) {
  const Bytes E = D.arch.experts, k = D.arch.experts_per_token, R = k * D.T, F = D.arch.expert_ffn;
  s.add(n::kMlpIn, D.e * D.h * D.T);
  s.add("router probabilities (softmax, fp32)", 4 * E * D.T);
  s.add("top-k expert indices (int64)", 8 * k * D.T);
  if (D.arch.norm_topk_prob) s.add("top-k weights' sum (fp32)", 4 * D.T);
  s.add("top-k weights (fp32)", 4 * k * D.T);
  s.add("routed rows' order and tokens (int64)", 16 * R);
  s.add("routed rows' mask (bool)", R);
  s.add("routed rows per expert (int32)", 4 * E);
  s.add("routed rows' input", D.e * D.h * R);
  s.add("experts' gate_up output", 2 * D.e * F * R);
  s.add("experts' activation output", D.e * F * R);
  s.add("experts' activation * up (down_proj input)", D.e * F * R);
  s.add("routed rows' weights", (D.arch.router_weights_fp32 ? 4 : D.e) * R);
  s.add("experts' down_proj output", D.e * D.h * R);
  s.add("routed rows' tokens for the scatter (int64)", 8 * R);
}

// A gated family's layer (Llama's names, which llama_backward frees): its norms where the block puts them, the
// attention with its q/k norms, the MLP (gate, act, up, their product: four F wide whether gate and up are one
// projection or two; its input shared with the attention's under Cohere's one norm).
BytesBreakdown llama_layer_saved(const ModelSpec& m, const Dims& D) {
  BytesBreakdown s;
  const BlockKind block = D.arch.block;
  if (block != BlockKind::post_norm) hidden_norm(s, D, "input_layernorm");
  s.add(n::kAttnIn, D.e * D.h * D.T);
  qk_norms_saved(s, D);
  attention_saved(s, m, D, true);
  if (block == BlockKind::sandwich || block == BlockKind::post_norm) hidden_norm(s, D, "post_attention_layernorm");
  if (block == BlockKind::pre_norm) hidden_norm(s, D, "post_attention_layernorm");
  if (block == BlockKind::sandwich) hidden_norm(s, D, "pre_feedforward_layernorm");
  if (D.arch.experts > 0) {
    moe_saved(s, D);
  } else {
    if (block != BlockKind::parallel_shared_norm) s.add(n::kMlpIn, D.e * D.h * D.T);
    s.add(n::kGate, D.e * D.f * D.T);
    s.add(n::kSilu, D.e * D.f * D.T);
    s.add(n::kUp, D.e * D.f * D.T);
    s.add(n::kProd, D.e * D.f * D.T);
  }
  if (block == BlockKind::sandwich || block == BlockKind::post_norm) hidden_norm(s, D, "post_feedforward_layernorm");
  if (m.hidden_dropout > 0) {
    s.add(n::kResidMaskA, D.h * D.T);
    s.add(n::kResidMaskM, D.h * D.T);
  }
  return s;
}

// A plain-MLP family's layer (GPT-2's names, which gpt2_backward frees): LayerNorms (GPT-NeoX's parallel block
// normalizes the layer input twice: its second norm saves no input of its own), q/k/v fused (GPT-2, GPT-NeoX) or not
// (OPT, StarCoder2), RoPE but for GPT-2 and OPT, the activation's saved tensors (gelu_new five, GELU and GELU-tanh
// two, ReLU one: its output is fc2's input), the residual dropouts.
BytesBreakdown gpt2_layer_saved(const ModelSpec& m, const Dims& D) {
  BytesBreakdown s;
  const bool rope = m.max_position_embeddings == 0;
  hidden_norm(s, D, "ln_1");
  s.add(n::kAttnIn, D.e * D.h * D.T);
  attention_saved(s, m, D, rope);
  if (m.hidden_dropout > 0) s.add(n::kResidMaskA, D.h * D.T);
  hidden_norm(s, D, "ln_2", D.arch.block == BlockKind::parallel);
  s.add(n::kMlpIn, D.e * D.h * D.T);
  switch (D.arch.act) {
    case ActKind::gelu_new:
      s.add(n::kFcOut, D.e * D.f * D.T);
      s.add(n::kTanh, D.e * D.f * D.T);
      s.add(n::kHalfX, D.e * D.f * D.T);
      s.add(n::kOnePlus, D.e * D.f * D.T);
      s.add(n::kAct, D.e * D.f * D.T);
      break;
    case ActKind::relu: s.add(n::kAct, D.e * D.f * D.T); break;
    default:
      s.add(n::kFcOut, D.e * D.f * D.T);
      s.add(n::kAct, D.e * D.f * D.T);
      break;
  }
  if (m.hidden_dropout > 0) s.add(n::kResidMaskM, D.h * D.T);
  return s;
}

// ---- backward tapes ----

// RMSNorm's backward (weight * y; y.to(dtype); x32 * rsqrt; rsqrt; mean; pow): fp32 temporaries of [T, h].
void rms_backward(Tape& tp, const Dims& D, const std::string& p, const std::string& in_grad) {
  const Bytes bf = D.e * D.h * D.T, f32 = 4 * D.h * D.T;
  tp.alloc(p + ": gradient of y (grad * weight)", bf);
  tp.alloc(p + ": weight-gradient product (grad * y)", bf);
  tp.alloc(p + ": weight-gradient reduction workspace", 8 * D.h * D.T);
  tp.free(p + ": weight-gradient reduction workspace");
  tp.free(p + ": weight-gradient product (grad * y)");
  tp.free(in_grad);
  tp.free(n::norm_y(p));
  tp.alloc(p + ": fp32 gradient (ToCopyBackward)", f32);
  tp.free(p + ": gradient of y (grad * weight)");
  tp.alloc(p + ": grad * rsqrt (fp32)", f32);
  tp.alloc(p + ": grad * x for the rsqrt gradient (fp32)", f32);
  tp.free(p + ": grad * x for the rsqrt gradient (fp32)");
  tp.free(p + ": fp32 gradient (ToCopyBackward)");
  tp.alloc(p + ": mean backward (fp32)", f32);
  tp.alloc(p + ": pow backward temporaries (fp32, 2)", 2 * f32);
  tp.alloc(p + ": gradient of the fp32 copy, summed (fp32)", f32);
  tp.free(p + ": pow backward temporaries (fp32, 2)");
  tp.free(p + ": mean backward (fp32)");
  tp.free(p + ": grad * rsqrt (fp32)");
  tp.free(n::norm_x32(p));
  tp.free(n::norm_rstd(p));
  tp.alloc(p + ": input gradient", bf);
  tp.free(p + ": gradient of the fp32 copy, summed (fp32)");
  tp.free(p + ": input gradient");  // accumulated into the residual stream's gradient in place
}

// nn.LayerNorm's backward (native_layer_norm_backward): the input gradient; the residual takes it in place.
void ln_backward(Tape& tp, const Dims& D, const std::string& p, const std::string& saved_input,
                 const std::string& in_grad) {
  tp.alloc(p + ": input gradient", D.e * D.h * D.T);
  tp.free(saved_input);
  tp.free(n::ln_stats(p));
  tp.free(in_grad);
  tp.free(p + ": input gradient");
}

// A projection's backward: its weight gradient (in flight until DeepSpeed's hook moves it) and input gradient;
// a biased one (Conv1D's addmm) also reduces its output gradient over the tokens into a workspace.
void linear_backward(Tape& tp, const Dims& D, const std::string& name, Bytes in_features, Bytes out_features,
                     bool bias, const std::string& out_grad, const std::string& in_grad_name) {
  tp.alloc(in_grad_name, D.e * in_features * D.T);
  tp.alloc(name + " weight gradient", D.e * in_features * out_features);
  if (bias) {
    tp.alloc(name + " bias-gradient reduction workspace", 8 * out_features * D.T);
    tp.free(name + " bias-gradient reduction workspace");
  }
  tp.free(out_grad);
  tp.free(name + " weight gradient");
}

void rope_backward(Tape& tp, const Dims& D, const std::string& which, Bytes width, const std::string& grad) {
  tp.alloc("RoPE backward temporary (" + which + ")", D.e * width * D.T);
  tp.alloc(which + "_proj output gradient", D.e * width * D.T);
  tp.free("RoPE backward temporary (" + which + ")");
  tp.free(grad);
}

// Eager attention's core backward, from the gradient of the output (before o_proj) to dq, dk, dv.
void eager_core_backward(Tape& tp, const ModelSpec& m, const Dims& D, bool fp32_softmax, const std::string& g_out,
                         const std::string& q_saved, const std::string& k_saved, const std::string& v_saved,
                         Bytes kv_width) {
  const Bytes S = D.bas2();
  const bool dropout = m.attention_dropout > 0;
  const std::string probs = dropout ? n::kPdrop : (fp32_softmax && D.e != 4 ? n::kProbs : (fp32_softmax ? n::kP32 : n::kP16));
  const std::string out = fp32_softmax ? n::kP32 : n::kP16;
  tp.alloc("gradient of the probabilities", D.e * S);
  tp.alloc("v gradient", D.e * kv_width * D.T);
  if (probs != out) tp.free(probs);  // else softmax's own saved output, freed after its backward
  tp.free(v_saved);
  tp.free(g_out);
  std::string g = "gradient of the probabilities";
  if (dropout) {
    tp.alloc("gradient before dropout", D.e * S);
    tp.free(n::kPmask);
    tp.free(g);
    g = "gradient before dropout";
  }
  const Bytes es = fp32_softmax ? 4 : D.e;
  if (fp32_softmax && D.e != 4) {
    tp.alloc("fp32 gradient of the probabilities (ToCopyBackward)", 4 * S);
    tp.free(g);
    g = "fp32 gradient of the probabilities (ToCopyBackward)";
  }
  tp.alloc("gradient of the scores (softmax backward)", es * S);
  tp.alloc("softmax backward temporary", es * S);
  tp.free("softmax backward temporary");
  tp.free(out);
  tp.free(g);
  g = "gradient of the scores (softmax backward)";
  if (fp32_softmax && D.e != 4) {
    tp.alloc("gradient of the scores in the training dtype", D.e * S);
    tp.free(g);
    g = "gradient of the scores in the training dtype";
  }
  tp.alloc("gradient of the unscaled scores", D.e * S);
  tp.free(g);
  tp.alloc("q gradient", D.e * D.qd * D.T);
  tp.alloc("k gradient", D.e * kv_width * D.T);
  tp.free("gradient of the unscaled scores");
  tp.free(q_saved);
  tp.free(k_saved);
}

BytesBreakdown llama_backward(const ModelSpec& m, const Dims& D, const BytesBreakdown& saved) {
  Tape tp;
  for (const auto& p : saved.parts) tp.have(p.name, p.bytes);
  tp.have(n::kLayerGrad, D.e * D.h * D.T);
  // MLP: down_proj, SiLU * up, up_proj, SiLU, gate_proj (the engine runs the later-created branch first).
  tp.alloc("down_proj weight gradient", D.e * D.h * D.f);
  tp.alloc("gradient of SiLU * up", D.e * D.f * D.T);
  tp.free(n::kProd);
  tp.free("down_proj weight gradient");
  tp.alloc("gradient of the SiLU output", D.e * D.f * D.T);
  tp.alloc("gradient of the up_proj output", D.e * D.f * D.T);
  tp.free(n::kSilu);
  tp.free(n::kUp);
  tp.free("gradient of SiLU * up");
  linear_backward(tp, D, "up_proj", D.h, D.f, m.bias, "gradient of the up_proj output", "MLP input gradient");
  tp.alloc("gradient of the gate_proj output", D.e * D.f * D.T);
  tp.free(n::kGate);
  tp.free("gradient of the SiLU output");
  linear_backward(tp, D, "gate_proj", D.h, D.f, m.bias, "gradient of the gate_proj output",
                  "MLP input gradient (gate_proj)");
  tp.free(n::kMlpIn);
  tp.free("MLP input gradient (gate_proj)");  // accumulated in place
  rms_backward(tp, D, "post_attention_layernorm", "MLP input gradient");
  // Attention.
  tp.alloc("o_proj weight gradient", D.e * D.qd * D.h);
  tp.alloc("gradient of the attention output", D.e * D.qd * D.T);
  tp.free("o_proj weight gradient");
  if (!eager(m)) {
    tp.alloc("q gradient", D.e * D.qd * D.T);
    tp.alloc("k gradient", D.e * D.kvd * D.T);
    tp.alloc("v gradient", D.e * D.kvd * D.T);
    // cuDNN's workspace: an fp32 dQ accumulator and the per-row dot(dO, O); with grouped heads also dK and dV
    // at all heads before the reduction over the group (measured: torch 2.11, H200).
    const Bytes ws = 4 * D.qd * D.T + 4 * D.a * D.T + (D.kv < D.a ? 2 * D.e * D.qd * D.T : 0);
    tp.alloc("cuDNN attention backward workspace", ws);
    tp.free("cuDNN attention backward workspace");
    for (const auto& x : {n::kQ, n::kK, n::kV, n::kSdpaOut, n::kLse}) tp.free(x);
    tp.free("gradient of the attention output");
  } else {
    tp.free(n::kOin);
    const bool grouped = D.kv < D.a;
    eager_core_backward(tp, m, D, /*fp32_softmax=*/true, "gradient of the attention output", n::kQ,
                        grouped ? n::kKrep : n::kK, grouped ? n::kVrep : n::kV, grouped ? D.qd : D.kvd);
    if (grouped) {
      tp.alloc("k gradient summed over the group", D.e * D.kvd * D.T);
      tp.free("k gradient");
      tp.alloc("v gradient summed over the group", D.e * D.kvd * D.T);
      tp.free("v gradient");
    }
  }
  const std::string dk = (eager(m) && D.kv < D.a) ? "k gradient summed over the group" : "k gradient";
  const std::string dv = (eager(m) && D.kv < D.a) ? "v gradient summed over the group" : "v gradient";
  rope_backward(tp, D, "q", D.qd, "q gradient");
  rope_backward(tp, D, "k", D.kvd, dk);
  linear_backward(tp, D, "q_proj", D.h, D.qd, m.bias, "q_proj output gradient", "attention input gradient");
  linear_backward(tp, D, "k_proj", D.h, D.kvd, m.bias, "k_proj output gradient", "attention input gradient (k)");
  tp.free("attention input gradient (k)");
  linear_backward(tp, D, "v_proj", D.h, D.kvd, m.bias, dv, "attention input gradient (v)");
  tp.free("attention input gradient (v)");
  tp.free(n::kAttnIn);
  rms_backward(tp, D, "input_layernorm", "attention input gradient");
  return tp.peak();
}

BytesBreakdown gpt2_backward(const ModelSpec& m, const Dims& D, const BytesBreakdown& saved) {
  Tape tp;
  for (const auto& p : saved.parts) tp.have(p.name, p.bytes);
  tp.have(n::kLayerGrad, D.e * D.h * D.T);
  const bool drop = m.hidden_dropout > 0;
  // MLP: dropout, c_proj, gelu_new's five ops, c_fc, ln_2.
  std::string g = n::kLayerGrad;
  if (drop) {
    tp.alloc("MLP dropout gradient", D.e * D.h * D.T);
    tp.free(n::kResidMaskM);
    g = "MLP dropout gradient";
  }
  tp.alloc("gradient of the gelu output", D.e * D.f * D.T);
  tp.alloc("c_proj (MLP) weight gradient", D.e * D.f * D.h);
  tp.alloc("c_proj (MLP) bias-gradient reduction workspace", 8 * D.h * D.T);
  tp.free("c_proj (MLP) bias-gradient reduction workspace");
  if (drop) tp.free(g);
  tp.free(n::kAct);
  tp.free("c_proj (MLP) weight gradient");
  const Bytes F = D.e * D.f * D.T;
  tp.alloc("gradient of 0.5 * x", F);
  tp.alloc("gradient of 1 + tanh", F);
  tp.free(n::kHalfX);
  tp.free(n::kOnePlus);
  tp.free("gradient of the gelu output");
  tp.alloc("gradient of the tanh input", F);
  tp.free(n::kTanh);
  tp.free("gradient of 1 + tanh");
  tp.alloc("gradient of x + 0.044715 x^3", F);
  tp.free("gradient of the tanh input");
  tp.alloc("gradient of x^3", F);
  tp.alloc("pow backward temporaries (2)", 2 * F);
  tp.alloc("pow backward gradient", F);
  tp.free("pow backward temporaries (2)");
  tp.free("gradient of x^3");
  tp.free("pow backward gradient");  // accumulated
  tp.alloc("gradient through 0.5 * x", F);
  tp.free("gradient of 0.5 * x");
  tp.free("gradient through 0.5 * x");  // accumulated
  tp.free(n::kFcOut);
  linear_backward(tp, D, "c_fc", D.h, D.f, true, "gradient of x + 0.044715 x^3", "MLP input gradient");
  tp.free(n::kMlpIn);
  ln_backward(tp, D, "ln_2", n::ln_in("ln_2"), "MLP input gradient");
  // Attention: dropout, c_proj, the attention core, c_attn, ln_1.
  g = n::kLayerGrad;
  if (drop) {
    tp.alloc("attention dropout gradient", D.e * D.h * D.T);
    tp.free(n::kResidMaskA);
    g = "attention dropout gradient";
  }
  linear_backward(tp, D, "c_proj (attention)", D.h, D.h, true, drop ? g : std::string{},
                  "gradient of the attention output");
  if (!eager(m)) {
    tp.alloc("q gradient", D.e * D.h * D.T);
    tp.alloc("k gradient", D.e * D.h * D.T);
    tp.alloc("v gradient", D.e * D.h * D.T);
    tp.alloc("cuDNN attention backward workspace", 4 * D.h * D.T + 4 * D.a * D.T);
    tp.free("cuDNN attention backward workspace");
    for (const auto& x : {n::kSdpaOut, n::kQkv, n::kLse}) tp.free(x);
    tp.free("gradient of the attention output");
  } else {
    tp.free(n::kOin);
    eager_core_backward(tp, m, D, /*fp32_softmax=*/false, "gradient of the attention output", "", "", "", D.h);
    tp.free(n::kQkv);
  }
  tp.alloc("qkv gradient (cat)", 3 * D.e * D.h * D.T);
  for (const auto& x : {"q gradient", "k gradient", "v gradient"}) tp.free(x);
  linear_backward(tp, D, "c_attn", D.h, 3 * D.h, true, "qkv gradient (cat)", "attention input gradient");
  tp.free(n::kAttnIn);
  ln_backward(tp, D, "ln_1", n::ln_in("ln_1"), "attention input gradient");
  return tp.peak();
}

}  // namespace

TransformersActivations transformers_activations(const ModelSpec& m, const TrainingSpec& t) {
  TransformersActivations r;
  r.family = hf_family(m);
  Dims D{};
  D.s = t.seq_len;
  D.b = t.micro_batch;
  D.T = D.s * D.b;
  D.e = bytes_per_element(t.precision);
  D.h = m.hidden;
  D.f = m.ffn_hidden;
  D.a = m.heads;
  D.kv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  D.d = head_dim(m);
  D.qd = D.a * D.d;
  D.kvd = D.kv * D.d;
  D.V = m.vocab;
  D.arch = architecture(m);
  // transformers' GPT-2 fuses q, k, v in c_attn; a GPT model given by numbers is priced as that code runs.
  if (D.arch.act == ActKind::gelu_new) D.arch.fused_qkv = true;
  const bool llama = r.family == HfFamily::llama;
  const bool rope = m.max_position_embeddings == 0;

  r.layer_saved = llama ? llama_layer_saved(m, D) : gpt2_layer_saved(m, D);
  r.layer_checkpoint_kept.add("layer input hidden states (checkpoint input)", D.e * D.h * D.T);
  if (eager(m)) {
    r.forward_mask.add("4-D additive causal mask [b, 1, s, s]", D.e * D.b * D.s * D.s);
    r.checkpoint_shared = r.forward_mask;
  }
  r.layer_recompute = r.layer_saved;
  if (!llama) {  // ln_1 saves the layer input itself, which the checkpoint already keeps
    const std::string in = n::ln_in("ln_1");
    r.layer_recompute = {};
    for (const auto& p : r.layer_saved.parts)
      if (p.name != in) r.layer_recompute.add(p.name, p.bytes);
  }
  if (eager(m)) {
    r.layer_forward_transient.add("masked scores in the training dtype", D.e * D.bas2());
    if (llama && D.e != 4) r.layer_forward_transient.add("scores converted to fp32 for softmax", 4 * D.bas2());
  }
  r.layer_backward_transient = llama ? llama_backward(m, D, r.layer_saved) : gpt2_backward(m, D, r.layer_saved);

  // RoPE's cos and sin ([1, s, rotated dims]), one pair per rotary embedding (Gemma-3: its local and global ones).
  if (rope) {
    const Bytes rotated = static_cast<Bytes>(static_cast<double>(D.d) * D.arch.rotary_fraction);
    const bool two = D.arch.qk_norm == QkNorm::per_head && D.arch.norm == NormKind::rms_gemma &&
                     D.arch.sliding_layers > 0 && D.arch.sliding_layers < m.layers;
    r.shared_saved.add("RoPE cos and sin [1, s, rotated dims]", (two ? 2 : 1) * 2 * D.e * D.s * rotated);
  }
  // Under sdpa a sliding layer saves its own 4-D mask once the sequence reaches the window (masking_utils.py
  // _ignore_causal_mask_sdpa: no skip at kv_length >= the window); a recompute rebuilds it.
  if (!eager(m) && D.arch.sliding_window > 0 && t.seq_len >= D.arch.sliding_window)
    r.sliding_masks_saved.add("sliding-window masks [b, 1, s, s] of " + std::to_string(D.arch.sliding_layers) +
                                  " layers",
                              D.arch.sliding_layers * D.e * D.b * D.s * D.s);
  r.embedding_saved.add("token ids (int64)", 8 * D.T);
  if (!rope) r.embedding_saved.add("position ids (int64, batch 1)", 8 * D.s);
  if (D.arch.embedding_dropout > 0) r.embedding_saved.add("embedding dropout mask (bool)", D.h * D.T);
  hidden_norm(r.head_saved, D, llama ? "norm" : "ln_f");
  r.head_saved.add("lm_head input (final norm output)", D.e * D.h * D.T);
  if (D.arch.final_softcapping) r.head_saved.add("soft-capped logits' tanh (training dtype)", D.e * D.V * D.T);
  r.head_saved.add("log-softmax output (fp32)", 4 * D.V * D.T);
  r.head_saved.add("shifted labels (int64)", 8 * D.T);
  r.logits_output.add("logits in the training dtype", D.e * D.V * D.T);
  if (D.e != 4) r.head_forward_transient.add("logits.float() (fp32 copy)", 4 * D.V * D.T);
  r.loss_backward_transient.add("nll_loss gradient (fp32)", 4 * D.V * D.T);
  r.loss_backward_transient.add("log_softmax gradient (fp32)", 4 * D.V * D.T);

  const Bytes rest = r.shared_saved.total + r.embedding_saved.total + r.head_saved.total;
  r.saved_no_checkpointing = m.layers * r.layer_saved.total + r.sliding_masks_saved.total + rest;
  r.saved_with_checkpointing = m.layers * r.layer_checkpoint_kept.total + r.checkpoint_shared.total + rest;
  return r;
}

}  // namespace zsim
