// transformers 5 activation inventory: each formula on a small config, values computed by hand from the derivation
// in docs/deepspeed-memory.md (not from the code), and the three test models' saved bytes as measured on one H200
// (torch 2.11, transformers 5.17, saved_tensors_hooks, storages deduplicated, parameters excluded).
#include "sim/plan/transformers_activations.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace zsim;

namespace {
// A small Llama: h 64, f 160, 4 heads of 16, vocab 100.
ModelSpec small_llama(std::int64_t kv_heads = 4, Attention attn = Attention::flash) {
  ModelSpec m;
  m.layers = 2;
  m.hidden = 64;
  m.ffn_hidden = 160;
  m.heads = 4;
  m.kv_heads = kv_heads;
  m.vocab = 100;
  m.mlp = MlpKind::gated;
  m.attention = attn;
  return m;
}
ModelSpec small_gpt2(Attention attn = Attention::flash) {
  ModelSpec m;
  m.layers = 2;
  m.hidden = 64;
  m.ffn_hidden = 256;
  m.heads = 4;
  m.kv_heads = 4;
  m.vocab = 100;
  m.max_position_embeddings = 32;
  m.tie_word_embeddings = true;
  m.mlp = MlpKind::plain;
  m.bias = true;
  m.attention = attn;
  m.attention_dropout = 0.1;
  m.hidden_dropout = 0.1;
  return m;
}
TrainingSpec training(std::int64_t s, std::int64_t b, Checkpointing c = Checkpointing::none) {
  TrainingSpec t;
  t.seq_len = s;
  t.micro_batch = b;
  t.activation_checkpointing = c;
  return t;
}
std::string dump(const BytesBreakdown& b) {
  std::string s;
  for (const auto& p : b.parts) s += "  " + p.name + ": " + std::to_string(p.bytes) + "\n";
  return s + "  total " + std::to_string(b.total);
}
}  // namespace

// RMSNorm: hidden_states.to(float32) is saved by pow and mul (4h), rsqrt saves its output (4 per token), the weight's
// mul saves the normalized input cast back to bf16 (2h): 6h + 4 bytes per token.
TEST(TransformersActivations, RmsNormSavesTheFp32CopyTheRsqrtAndTheBf16NormalizedInput) {
  const auto r = transformers_activations(small_llama(), training(16, 2));
  const Bytes T = 32;
  EXPECT_EQ(r.layer_saved.of("input_layernorm: fp32 copy of its input (pow, mul)"), 4 * 64 * T);
  EXPECT_EQ(r.layer_saved.of("input_layernorm: rsqrt of the variance (fp32)"), 4 * T);
  EXPECT_EQ(r.layer_saved.of("input_layernorm: normalized input in the training dtype (weight *)"), 2 * 64 * T);
}

// Llama layer with sdpa, per token: norms 2(6h + 4), q/k/v input 2h, q 2h, k and v 2 kv_dim each, the sdpa output
// (= o_proj input) 2h, lse 4a, MLP input 2h, gate, SiLU, up and their product 8f: 20h + 4 kv_dim + 8f + 4a + 8.
TEST(TransformersActivations, LlamaSdpaLayer) {
  const auto r = transformers_activations(small_llama(), training(16, 2));
  const Bytes T = 32, h = 64, f = 160, a = 4;
  EXPECT_EQ(r.layer_saved.total, T * (20 * h + 4 * h + 8 * f + 4 * a + 8)) << dump(r.layer_saved);  // 2,840 / token
  EXPECT_EQ(r.layer_saved.total, 32 * 2840);
}

// Grouped keys and values: sdpa passes enable_gqa (no mask), so k and v stay at the kv heads; eager repeats them to
// all heads (repeat_kv) and the matmuls save the repeated copies.
TEST(TransformersActivations, GroupedQueryAttentionSdpaKeepsKvHeadsEagerRepeats) {
  const Bytes T = 32, h = 64, kvd = 16;  // 1 kv head of 16
  const auto sdpa = transformers_activations(small_llama(1), training(16, 2));
  EXPECT_EQ(sdpa.layer_saved.of("k after RoPE"), 2 * kvd * T);
  EXPECT_EQ(sdpa.layer_saved.of("v (v_proj output)"), 2 * kvd * T);
  const auto eager = transformers_activations(small_llama(1, Attention::eager), training(16, 2));
  EXPECT_EQ(eager.layer_saved.of("k repeated to all heads (repeat_kv)"), 2 * h * T);
  EXPECT_EQ(eager.layer_saved.of("v repeated to all heads (repeat_kv)"), 2 * h * T);
  EXPECT_EQ(eager.layer_saved.of("k after RoPE"), 0);
}

// Eager Llama: softmax(dtype=float32) saves its fp32 output (4 b a s^2), the .to(bf16) copy is saved by the matmul
// with v (2 b a s^2); dropout p = 0 is the identity and saves nothing. No lse; the transposed attention output is a
// fresh copy for o_proj.
TEST(TransformersActivations, EagerLlamaKeepsFp32AndBf16Probabilities) {
  const auto r = transformers_activations(small_llama(4, Attention::eager), training(16, 2));
  const Bytes b = 2, a = 4, s = 16, T = 32, h = 64, f = 160;
  EXPECT_EQ(r.layer_saved.of("softmax output (fp32)"), 4 * b * a * s * s);
  EXPECT_EQ(r.layer_saved.of("probabilities in the training dtype (matmul with v)"), 2 * b * a * s * s);
  EXPECT_EQ(r.layer_saved.of("sdpa log-sum-exp (fp32, per head and row)"), 0);
  // 20h + 4 kv_dim + 8f + 8 per token (o_proj's input replaces the sdpa output) + 6 b a s^2.
  EXPECT_EQ(r.layer_saved.total, T * (24 * h + 8 * f + 8) + 6 * b * a * s * s);
  // The mask lives through the forward; the fp32 conversion of the masked scores is the forward's transient.
  EXPECT_EQ(r.forward_mask.total, 2 * b * s * s);
  EXPECT_EQ(r.layer_forward_transient.total, (2 + 4) * b * a * s * s);
}

// Non-reentrant checkpointing keeps each layer's input (2h per token) and, for eager, the one shared mask; the
// recompute holds the whole saved set again.
TEST(TransformersActivations, CheckpointingKeepsOnlyTheLayerInput) {
  const auto r = transformers_activations(small_llama(), training(16, 2, Checkpointing::full));
  EXPECT_EQ(r.layer_checkpoint_kept.total, 2 * 64 * 32);
  EXPECT_EQ(r.checkpoint_shared.total, 0);
  EXPECT_EQ(r.layer_recompute.total, r.layer_saved.total);
  const auto e = transformers_activations(small_llama(4, Attention::eager), training(16, 2));
  EXPECT_EQ(e.checkpoint_shared.total, 2 * 2 * 16 * 16);
  // GPT-2's ln_1 saves the layer input itself: the recompute holds the saved set less that input.
  const auto g = transformers_activations(small_gpt2(), training(16, 2));
  EXPECT_EQ(g.layer_saved.total - g.layer_recompute.total, 2 * 64 * 32);
}

// GPT-2 layer with sdpa and dropout 0.1, per token: ln_1 input 2h + stats 8, c_attn input 2h, qkv 6h (one storage),
// sdpa output 2h, lse 4a, residual dropout mask h, ln_2 input 2h + 8, c_fc input 2h, gelu_new's saved x, tanh,
// 0.5x, 1 + tanh 8f, gelu output 2f, MLP dropout mask h: 18h + 10f + 4a + 16.
TEST(TransformersActivations, Gpt2SdpaLayer) {
  const auto r = transformers_activations(small_gpt2(), training(16, 2));
  const Bytes T = 32, h = 64, f = 256, a = 4;
  EXPECT_EQ(r.layer_saved.total, T * (18 * h + 10 * f + 4 * a + 16)) << dump(r.layer_saved);
}

// GPT-2 eager: the softmax runs in bf16 (2 b a s^2 saved), the dropout saves its bool mask (b a s^2) and the
// matmul the dropped probabilities (2 b a s^2); the transposed output is a copy (2h) instead of lse (4a).
TEST(TransformersActivations, Gpt2EagerKeepsFiveBytesPerScore) {
  const auto sdpa = transformers_activations(small_gpt2(), training(16, 2));
  const auto eager = transformers_activations(small_gpt2(Attention::eager), training(16, 2));
  const Bytes b = 2, a = 4, s = 16, T = 32;
  EXPECT_EQ(eager.layer_saved.total - sdpa.layer_saved.total, 5 * b * a * s * s - 4 * a * T);
}

// The head: the loss upcasts the bf16 logits (the fp32 copy is transient), log_softmax saves its fp32 output; its
// backward holds nll_loss's and log_softmax's fp32 gradients at once (8 V bytes per token).
TEST(TransformersActivations, HeadAndLoss) {
  const auto r = transformers_activations(small_llama(), training(16, 2));
  const Bytes T = 32, V = 100, h = 64;
  EXPECT_EQ(r.head_saved.of("log-softmax output (fp32)"), 4 * V * T);
  EXPECT_EQ(r.head_saved.total, T * (6 * h + 4 + 2 * h + 4 * V + 8));
  EXPECT_EQ(r.logits_output.total, 2 * V * T);
  EXPECT_EQ(r.head_forward_transient.total, 4 * V * T);
  EXPECT_EQ(r.loss_backward_transient.total, 8 * V * T);
  EXPECT_EQ(r.shared_saved.total, 2 * 2 * 16 * 16);  // cos, sin: [1, s, head_dim] bf16
}

// A gated MLP's backward peaks at SiLU * up's backward (the gradients of SiLU and up beside the product's, the
// product freed: +4f per token) unless down_proj's weight gradient (h x f) and the product's gradient (2f per token)
// are more: with T = 32 tokens, 2fT + 2hf = 10,240 + 20,480 > 4fT = 20,480.
TEST(TransformersActivations, GatedMlpBackwardPeak) {
  const Bytes h = 64, f = 160;
  const auto few = transformers_activations(small_llama(), training(16, 2));
  EXPECT_EQ(few.layer_backward_transient.total, 2 * f * 32 + 2 * h * f) << dump(few.layer_backward_transient);
  const auto many = transformers_activations(small_llama(), training(512, 2));  // 1024 tokens: 4fT wins
  EXPECT_EQ(many.layer_backward_transient.total, 4 * f * 1024) << dump(many.layer_backward_transient);
}

// The three test models at sequence 1024, batch 1, against what saved_tensors_hooks recorded on the H200 (the sum
// of distinct storages, parameters excluded; the measurement also holds a few 0-d tensors: sdpa's philox seed and
// offset, 16 bytes a layer, and the loss).
namespace {
ModelSpec llama(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv, std::int64_t f,
                Attention attn) {
  ModelSpec m;
  m.layers = layers;
  m.hidden = h;
  m.ffn_hidden = f;
  m.heads = heads;
  m.kv_heads = kv;
  m.vocab = 32000;
  m.mlp = MlpKind::gated;
  m.attention = attn;
  return m;
}
ModelSpec gpt2_124m(Attention attn) {
  ModelSpec m = small_gpt2(attn);
  m.layers = 12;
  m.hidden = 768;
  m.ffn_hidden = 3072;
  m.heads = 12;
  m.kv_heads = 12;
  m.vocab = 50257;
  m.max_position_embeddings = 1024;
  return m;
}
void expect_near_bytes(Bytes model, Bytes measured, Bytes slack, const char* what) {
  EXPECT_LE(std::llabs(model - measured), slack) << what << ": model " << model << " measured " << measured;
}
}  // namespace

TEST(TransformersActivations, TestModelsMatchTheH200Measurement) {
  const TrainingSpec t = training(1024, 1);
  const TrainingSpec tc = training(1024, 1, Checkpointing::full);
  struct Case {
    ModelSpec m;
    Bytes saved, saved_ckpt;
    const char* what;
  };
  // Measured total_saved (probe of 2026-12-01) in bytes.
  const Case cases[] = {
      {llama(768, 12, 12, 12, 2048, Attention::flash), 566153420, 156258316, "llama-150m sdpa"},
      {llama(768, 12, 12, 12, 2048, Attention::eager), 1471533068, 156258316, "llama-150m eager"},
      {llama(2048, 24, 16, 4, 5632, Attention::flash), 2314424716, 248533004, "llama-1.3b sdpa"},
      {llama(2048, 24, 16, 4, 5632, Attention::eager), 4879765516, 248533004, "llama-1.3b eager"},
      {gpt2_124m(Attention::flash), 757960908, 228691980, "gpt2-124m sdpa"},
      {gpt2_124m(Attention::eager), 1512345612, 230789132, "gpt2-124m eager"},
  };
  for (const auto& c : cases) {
    const auto r = transformers_activations(c.m, t);
    expect_near_bytes(r.saved_no_checkpointing, c.saved, 1024, c.what);
    // Under checkpointing the probe sees the hidden states and GPT-2's positional mask, not Llama's kwargs (cos,
    // sin, mask): those are held by the recompute closures, not saved.
    const auto rc = transformers_activations(c.m, tc);
    Bytes ckpt = rc.saved_with_checkpointing - rc.shared_saved.total;
    if (rc.family == HfFamily::llama) ckpt -= rc.checkpoint_shared.total;
    expect_near_bytes(ckpt, c.saved_ckpt, 1024, c.what);
  }
}
