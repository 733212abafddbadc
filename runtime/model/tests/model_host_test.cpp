// Host-side properties of zrun's model (no GPU): the synthetic data is a function of the global sample
// index, initialisation of any slice equals that slice of the whole tensor, the config follows the
// scenario's model and plan, and every plan unit names a model unit.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>

#include "runtime/model/activation_buffers.hpp"
#include "runtime/model/activation_layout.hpp"
#include "runtime/model/init.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/synthetic_data.hpp"
#include "runtime/model/tests/cpu_reference.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/scenario/presets.hpp"

namespace zrun::model {
namespace {

zsim::Scenario scenario_of(const zsim::ModelSpec& m, int stage, int gpus) {
  zsim::Scenario s;
  s.model = m;
  s.training.micro_batch = 2;
  s.training.seq_len = 16;
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = gpus;
  s.zero.stage = stage;
  s.runtime = zsim::RuntimeKind::zrun;  // zrun's model: the schedule's activation buffers are its own layers'
  return s;
}

zsim::ModelSpec tiny_llama() {
  zsim::ModelSpec m;
  m.layers = 2, m.hidden = 64, m.ffn_hidden = 128, m.heads = 4, m.kv_heads = 2, m.vocab = 128;
  m.mlp = zsim::MlpKind::gated;
  m.attention = zsim::Attention::eager;  // head dim 16: flash runs 64 and 128
  return m;
}

TEST(SyntheticData, SampleDependsOnlyOnItsGlobalIndex) {
  const SyntheticData d(128);
  std::vector<std::int32_t> tok(3 * 16), tgt(3 * 16), one(17);
  d.batch(5, 3, 16, tok.data(), tgt.data());  // samples 5, 6, 7
  d.sample(6, 17, one.data());
  for (int p = 0; p < 16; ++p) {
    EXPECT_EQ(tok[16 + p], one[p]) << p;
    EXPECT_EQ(tgt[16 + p], one[p + 1]) << p;
  }
}

TEST(SyntheticData, DifferentSamplesAndSeedsDiffer) {
  std::vector<std::int32_t> a(64), b(64), c(64);
  SyntheticData(1000, 1).sample(0, 64, a.data());
  SyntheticData(1000, 1).sample(1, 64, b.data());
  SyntheticData(1000, 2).sample(0, 64, c.data());
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

TEST(SyntheticData, MostTransitionsFollowTheBigramTable) {
  const SyntheticData d(256);
  std::vector<std::int32_t> t(4097);
  d.sample(42, 4097, t.data());
  int follow = 0;
  for (int p = 1; p < 4097; ++p) follow += t[p] == d.successor(t[p - 1], 0) || t[p] == d.successor(t[p - 1], 1);
  EXPECT_GT(follow / 4096.0, 0.85);  // 90% structured, plus noise that lands on a successor by chance
  EXPECT_LT(follow / 4096.0, 0.95);
  EXPECT_LT(d.entropy_floor_nats(), 0.5 * std::log(256.0));  // learnable: the floor is below half ln(vocab)
}

TEST(Init, AnySliceEqualsThatSliceOfTheWholeTensor) {
  const ModelConfig c;
  const std::int64_t n = 1000;
  std::vector<float> whole(n);
  init_tensor(c, "L1.attn.q", 0, n, whole.data());
  for (const auto& [off, cnt] : std::vector<std::pair<int, int>>{{0, 1}, {1, 333}, {500, 500}, {999, 1}, {37, 250}}) {
    std::vector<float> part(cnt);
    init_tensor(c, "L1.attn.q", off, cnt, part.data());
    for (int i = 0; i < cnt; ++i) ASSERT_EQ(part[i], whole[off + i]) << off << "+" << i;
  }
}

TEST(Init, TensorsOfDifferentNamesDifferAndFollowTheirRule) {
  ModelConfig c;
  c.layers = 8;
  const std::int64_t n = 20000;
  std::vector<float> q0(n), q1(n), o(n), w(8), b(8);
  init_tensor(c, "L0.attn.q", 0, n, q0.data());
  init_tensor(c, "L1.attn.q", 0, n, q1.data());
  init_tensor(c, "L0.attn.o", 0, n, o.data());
  init_tensor(c, "L0.mlp.norm.weight", 0, 8, w.data());
  init_tensor(c, "L0.attn.q.bias", 0, 8, b.data());
  EXPECT_NE(q0, q1);
  auto stddev = [](const std::vector<float>& v) {
    double s = 0, s2 = 0;
    for (float x : v) s += x, s2 += double(x) * x;
    const double m = s / v.size();
    return std::sqrt(s2 / v.size() - m * m);
  };
  EXPECT_NEAR(stddev(q0), 0.02, 0.001);
  EXPECT_NEAR(stddev(o), 0.02 / std::sqrt(16.0), 0.0002);  // GPT-2's 1/sqrt(2 * layers) for output projections
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(w[i], 1.0f);
    EXPECT_EQ(b[i], 0.0f);
  }
}

TEST(ModelConfigFromScenario, LlamaStyleIsRmsNormSwiGluUntiedWithGroupedKv) {
  const zsim::Scenario s = scenario_of(tiny_llama(), 3, 2);
  const ModelConfig c = model_config(s, zsim::make_plan(s));
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_EQ(c.ffn, 128);
  EXPECT_TRUE(c.gated);
  EXPECT_FALSE(c.bias);
  EXPECT_FALSE(c.tied_head);
  EXPECT_EQ(c.max_positions, 0);
  EXPECT_EQ(c.tokens(), 32);
  EXPECT_EQ(c.dtype, DType::bf16);
  EXPECT_TRUE(c.checkpointing);  // the scenario's default: full checkpointing
}

TEST(ModelConfigFromScenario, Gpt2PresetIsLayerNormGeluWithBiasesLearnedPositionsTiedHead) {
  zsim::Scenario s = scenario_of(*zsim::model_preset("gpt2-1.5b"), 0, 1);
  s.training.precision = zsim::Precision::fp32;
  s.training.activation_checkpointing = zsim::Checkpointing::none;
  s.model.attention = zsim::Attention::eager;  // flash runs bf16 / fp16
  const ModelConfig c = model_config(s, zsim::make_plan(s));
  EXPECT_TRUE(c.bias);
  EXPECT_FALSE(c.gated);
  EXPECT_TRUE(c.tied_head);
  EXPECT_EQ(c.max_positions, 1024);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.dtype, DType::fp32);
  EXPECT_FALSE(c.checkpointing);
}

TEST(ModelConfigFromScenario, SequenceLongerThanLearnedPositionsIsRefused) {
  zsim::Scenario s = scenario_of(*zsim::model_preset("gpt2-1.5b"), 0, 1);
  s.training.seq_len = 2048;
  EXPECT_THROW(model_config(s, zsim::make_plan(s)), std::invalid_argument);
}

TEST(ModelConfigFromScenario, FlashAttentionIsTakenFromTheScenario) {
  zsim::Scenario s = scenario_of(*zsim::model_preset("gpt2-1.5b"), 0, 1);  // head dim 64, bf16
  s.model.attention = zsim::Attention::flash;
  EXPECT_TRUE(model_config(s, zsim::make_plan(s)).flash_attention);
  s.model.attention = zsim::Attention::eager;
  EXPECT_FALSE(model_config(s, zsim::make_plan(s)).flash_attention);
}

TEST(ModelConfigFromScenario, FlashAttentionOutsideBf16Fp16HeadDim64Or128IsRefused) {
  zsim::ModelSpec m = tiny_llama();  // head dim 16
  m.attention = zsim::Attention::flash;
  const zsim::Scenario s16 = scenario_of(m, 0, 1);
  try {
    model_config(s16, zsim::make_plan(s16));
    ADD_FAILURE() << "head dim 16 with flash attention was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("head dim 16"), std::string::npos) << e.what();
  }
  zsim::Scenario s = scenario_of(*zsim::model_preset("gpt2-1.5b"), 0, 1);
  s.model.attention = zsim::Attention::flash;
  s.training.precision = zsim::Precision::fp32;
  EXPECT_THROW(model_config(s, zsim::make_plan(s)), std::invalid_argument);
}

TEST(UnitRef, EveryPlanUnitNamesOneModelUnit) {
  for (const bool gpt : {false, true}) {
    zsim::ModelSpec m = tiny_llama();
    if (gpt) m.bias = true, m.mlp = zsim::MlpKind::plain, m.tie_word_embeddings = true, m.max_position_embeddings = 16;
    const zsim::Scenario s = scenario_of(m, 3, 2);
    const zsim::Plan p = zsim::make_plan(s);
    std::set<std::pair<int, int>> seen;
    for (const auto& u : p.units) {
      const UnitRef r = unit_ref(u.name);
      EXPECT_EQ(r.layer, u.layer) << u.name;
      EXPECT_TRUE(seen.insert({static_cast<int>(r.kind), r.layer}).second) << u.name;
    }
    EXPECT_EQ(seen.size(), p.units.size());
  }
  EXPECT_THROW(unit_ref("L0.mlp.bogus"), std::invalid_argument);
  EXPECT_EQ(tensor_full_name("L3.attn.q", "attn.q.bias"), "L3.attn.q.bias");
  EXPECT_EQ(tensor_full_name("embedding", "embed.tokens"), "embed.tokens");
}

TEST(ActivationLayout, CheckpointedLayerKeepsOnlyItsInputAsZsimAssumes) {
  zsim::Scenario s = scenario_of(tiny_llama(), 0, 1);
  const zsim::Plan p = zsim::make_plan(s);
  const ModelConfig c = model_config(s, p);
  const ActivationLayout a = activation_layout(c);
  EXPECT_EQ(a.layer_bytes(true), c.tokens() * c.hidden * 2);  // 2sbh at 16 bits
  EXPECT_EQ(a.layer_bytes(true), p.activations.per_layer_checkpoint);
  EXPECT_EQ(a.layer_bytes(false), a.layer_bytes(true) + a.work_bytes());
  // The working set holds the materialised softmax: b * heads * s * s elements.
  EXPECT_GE(a.work_bytes(), c.micro_batch * c.heads * c.seq_len * c.seq_len * 2);
  EXPECT_GE(a.head_bytes(), c.tokens() * c.vocab * 2);
}

TEST(ActivationLayout, LayerWithoutCheckpointingKeepsExactlyItsBackwardInputs) {
  // The tiny shapes make every tensor a multiple of the 256-byte alignment, so the sizes add up exactly.
  for (const bool gated : {true, false}) {
    zsim::ModelSpec m = tiny_llama();
    m.mlp = gated ? zsim::MlpKind::gated : zsim::MlpKind::plain;
    zsim::Scenario s = scenario_of(m, 0, 1);
    s.training.activation_checkpointing = zsim::Checkpointing::none;
    const ModelConfig c = model_config(s, zsim::make_plan(s));
    const std::int64_t T = 32, h = 64, kv = 32, f = 128, es = 2, b = 2, heads = 4, seq = 16;
    // x_in, n1, q, attn, x_mid, n2; k, v; softmax probs; two norms' fp32 mean + rstd; gate?, up, act.
    const std::int64_t expect = 6 * T * h * es + 2 * T * kv * es + b * heads * seq * seq * es + 2 * (2 * T * 4) +
                                (gated ? 3 : 2) * T * f * es;
    const ActivationLayout a = activation_layout(c);
    EXPECT_EQ(a.layer_bytes(false), expect) << (gated ? "SwiGLU" : "GeLU");
    const zsim::ActivationBytes z = zsim_buffer_bytes(a);
    EXPECT_EQ(z.per_layer_no_recompute, expect);
    EXPECT_EQ(z.per_layer_checkpoint, T * h * es);
    EXPECT_EQ(z.per_layer_work_bytes, expect - T * h * es);  // all but the input
    // The backward's gradients: residual stream, norm output, attention output, dq; dk, dv; d(probs); two f-wide.
    EXPECT_EQ(z.backward_grad_bytes, 4 * T * h * es + 2 * T * kv * es + b * heads * seq * seq * es + 2 * T * f * es);
    // The last layer's output and the final norm's (+ its fp32 mean, rstd: 256 bytes here), the logits, then lse
    // and token losses (T fp32 = 128 bytes each) and the mean, each padded to 256 bytes.
    EXPECT_EQ(z.head_bytes, 2 * T * h * es + 2 * T * 4 + T * c.vocab * es + 3 * 256);
  }
}

// Flash attention keeps the fp32 log-sum-exp of each row per head (4 bytes x b x heads x s) where eager keeps
// the b x heads x s x s softmax: the layer's bytes are zsim's flash prediction minus, when gated, the f-wide
// tensor zrun does not keep (act(gate): its fused SwiGLU backward recomputes it from gate); its backward's
// gradients are zsim's flash figure (delta and the fp32 dq accumulator instead of eager's d(probs)).
TEST(ActivationLayout, FlashLayerKeepsTheRowLogSumExpInsteadOfTheScores) {
  for (const bool gated : {true, false}) {
    zsim::ModelSpec m;
    m.layers = 2, m.hidden = 256, m.ffn_hidden = 512, m.heads = 4, m.kv_heads = 2, m.vocab = 128;  // head dim 64
    m.mlp = gated ? zsim::MlpKind::gated : zsim::MlpKind::plain;
    m.attention = zsim::Attention::flash;
    zsim::Scenario s = scenario_of(m, 0, 1);
    s.training.seq_len = 64;
    s.training.activation_checkpointing = zsim::Checkpointing::none;
    const zsim::Plan p = zsim::make_plan(s);
    const ModelConfig c = model_config(s, p);
    ASSERT_TRUE(c.flash_attention);
    const std::int64_t T = 128, h = 256, kv = 128, f = 512, es = 2, b = 2, heads = 4, seq = 64;
    const std::int64_t lse = 4 * b * heads * seq, stats = 2 * (2 * T * 4);
    const std::int64_t expect = 6 * T * h * es + 2 * T * kv * es + lse + stats + (gated ? 3 : 2) * T * f * es;
    const ActivationLayout a = activation_layout(c);
    EXPECT_EQ(a.layer_bytes(false), expect) << (gated ? "SwiGLU" : "GeLU");
    EXPECT_EQ(a.layer_bytes(false) + (gated ? T * f * es : 0), p.activations.per_layer_no_recompute);
    // The backward's scratch: delta (one float per row and head) and the fp32 dq accumulator, no s x s.
    EXPECT_EQ(a.grad_bytes(), 4 * T * h * es + 2 * T * kv * es + lse + T * h * 4 + 2 * T * f * es);
    EXPECT_EQ(a.grad_bytes(), p.activations.backward_grad_bytes);
  }
}

// The executor sizes each activation buffer of a schedule by its detail, and allocates the gradients and (under
// checkpointing) the forward working set itself only for a schedule that has no buffer for them.
TEST(ActivationBuffers, EachDetailGetsTheModelsBytesAndTheExecutorOwnsOnlyWhatTheScheduleLacks) {
  for (const bool ckpt : {false, true}) {
    zsim::Scenario s = scenario_of(tiny_llama(), 0, 1);
    s.training.activation_checkpointing = ckpt ? zsim::Checkpointing::full : zsim::Checkpointing::none;
    const zsim::Plan p = zsim::make_plan(s);
    const ModelConfig c = model_config(s, p);
    const ActivationLayout l = activation_layout(c);
    zsim::Schedule sch = zsim::make_schedule(s, p, 1);
    auto mem = [](const std::string& detail) {
      zsim::MemOp m;
      m.category = zsim::MemCategory::activations;
      m.detail = detail;
      m.bytes = 12345;
      return m;
    };
    EXPECT_EQ(needed_activation_bytes(l, ckpt, mem("")), l.layer_bytes(ckpt));
    EXPECT_EQ(needed_activation_bytes(l, ckpt, mem("recompute")), l.work_bytes());
    EXPECT_EQ(needed_activation_bytes(l, ckpt, mem("forward_work")), l.work_bytes());
    EXPECT_EQ(needed_activation_bytes(l, ckpt, mem("grad")), l.grad_bytes());
    EXPECT_EQ(needed_activation_bytes(l, ckpt, mem("logits")), l.head_bytes());
    EXPECT_EQ(needed_activation_bytes(l, ckpt, mem("other")), 12345);
    zsim::MemOp bucket = mem("");
    bucket.category = zsim::MemCategory::buffers;
    EXPECT_EQ(needed_activation_bytes(l, ckpt, bucket), 12345);
    // zsim's schedule has both buffers: the executor allocates no activations of its own.
    EXPECT_EQ(own_activation_bytes(sch, l, ckpt).total(), 0);
    // A schedule without them (an older zsim's): the gradients, and the working set under checkpointing.
    for (zsim::Op& op : sch.ops)
      if (op.mem.detail == "grad" || op.mem.detail == "forward_work") op.mem.detail = "renamed";
    const OwnActivationBytes own = own_activation_bytes(sch, l, ckpt);
    EXPECT_EQ(own.grad_bytes, l.grad_bytes());
    EXPECT_EQ(own.forward_work_bytes, ckpt ? l.work_bytes() : 0);
  }
}

using test::Params;
using test::Vec;

// The GPU tests' oracle checked against the definition of a gradient: central differences of its loss.
TEST(CpuReference, GradientsMatchFiniteDifferencesOfTheLoss) {
  for (const bool gpt : {false, true}) {
    ModelConfig c;
    c.hidden = 8, c.heads = 2, c.kv_heads = 1, c.head_dim = 4, c.ffn = 12, c.vocab = 11, c.layers = 2;
    c.seq_len = 4, c.micro_batch = 2, c.bias = gpt, c.gated = !gpt, c.tied_head = gpt, c.max_positions = gpt ? 4 : 0;
    std::vector<std::pair<std::string, std::int64_t>> shapes = {{"embed.tokens", 11 * 8}, {"final.norm.weight", 8}};
    if (gpt) shapes.push_back({"embed.positions", 4 * 8}), shapes.push_back({"final.norm.bias", 8});
    else shapes.push_back({"head.out", 8 * 11});
    for (int l = 0; l < 2; ++l) {
      const std::string L = "L" + std::to_string(l) + ".";
      for (const auto& [n, k] : std::vector<std::pair<std::string, std::int64_t>>{
               {"attn.q", 64}, {"attn.k", 32}, {"attn.v", 32}, {"attn.o", 64}, {"mlp.up", 96}, {"mlp.down", 96}}) {
        shapes.push_back({L + n, k});
        if (gpt) shapes.push_back({L + n + ".bias", n == "attn.k" || n == "attn.v" ? 4 : (n == "mlp.up" ? 12 : 8)});
      }
      if (!gpt) shapes.push_back({L + "mlp.gate", 96});
      for (const char* nm : {"attn.norm", "mlp.norm"}) {
        shapes.push_back({L + nm + ".weight", 8});
        if (gpt) shapes.push_back({L + nm + ".bias", 8});
      }
    }
    Params p;
    std::uint64_t k = 0;
    for (const auto& [n, cnt] : shapes) {
      Vec v(cnt);
      for (auto& x : v) x = (n.find("norm.weight") != std::string::npos ? 1.0 : 0.0) + 0.5 * uniform_pm1(99, k++);
      p[n] = v;
    }
    const std::vector<std::int32_t> tok = {1, 5, 7, 2, 9, 0, 3, 3}, tgt = {5, 7, 2, 4, 0, 3, 3, 10};
    test::CpuReference ref(c, p);
    ref.run(tok, tgt);
    const Params g = ref.grads();
    for (const auto& [n, cnt] : shapes)
      for (std::int64_t i : {std::int64_t{0}, cnt / 2, cnt - 1}) {
        const double eps = 1e-6;
        Params plus = p, minus = p;
        plus[n][i] += eps, minus[n][i] -= eps;
        const double fd = (test::CpuReference(c, plus).run(tok, tgt) - test::CpuReference(c, minus).run(tok, tgt)) / (2 * eps);
        EXPECT_NEAR(g.at(n)[i], fd, 1e-7 + 1e-5 * std::abs(fd)) << (gpt ? "gpt " : "llama ") << n << "[" << i << "]";
      }
  }
}

}  // namespace
}  // namespace zrun::model
