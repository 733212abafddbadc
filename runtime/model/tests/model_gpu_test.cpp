// zrun's model on the GPU against the double-precision CPU reference (tests/cpu_reference.hpp): loss,
// logits and every parameter gradient of a tiny model, Llama-style (RMSNorm, SwiGLU, grouped kv heads,
// untied) and GPT-style (LayerNorm and linears with biases, GeLU, learned positions, tied or untied head),
// in fp32 (<= 1e-4 relative) and bf16 / fp16 (<= 2e-2), eager and flash attention; recompute under full checkpointing gives the
// gradients of the run without it; backward accumulates and is deterministic. Skipped with a message without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/tests/gpu_test_util.hpp"
#include "runtime/model/tests/cpu_reference.hpp"
#include "runtime/model/tests/model_harness.hpp"

namespace zrun::model::test {
namespace {

struct Variant {
  bool gpt = false;       // GPT-style: biases + LayerNorm + GeLU + learned positions
  bool tied = false;
  zsim::Precision precision = zsim::Precision::fp32;
  bool checkpointing = false;
  bool flash = false;     // flash attention: hidden 128, 2 heads / 1 kv head (head dim 64, what flash runs)
};

zsim::Scenario tiny(const Variant& v) {
  zsim::ModelSpec m;
  m.layers = 2, m.hidden = 64, m.ffn_hidden = 128, m.heads = 4, m.kv_heads = 2, m.vocab = 128;
  if (v.flash) m.hidden = 128, m.heads = 2, m.kv_heads = 1;
  m.attention = v.flash ? zsim::Attention::flash : zsim::Attention::eager;
  m.mlp = v.gpt ? zsim::MlpKind::plain : zsim::MlpKind::gated;
  m.bias = v.gpt;
  m.max_position_embeddings = v.gpt ? 32 : 0;
  m.tie_word_embeddings = v.tied;
  zsim::Scenario s;
  s.model = m;
  s.training.micro_batch = 2;
  s.training.seq_len = 16;
  s.training.precision = v.precision;
  s.training.activation_checkpointing = v.checkpointing ? zsim::Checkpointing::full : zsim::Checkpointing::none;
  s.cluster.nodes = 1, s.cluster.gpus_per_node = 1;
  return s;
}

// Random parameters (wider than the training init so every path carries signal), rounded to the dtype,
// uploaded to the harness and returned by full name for the reference.
Params random_params(Harness& hs, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Params out;
  for (std::size_t un = 0; un < hs.plan.units.size(); ++un)
    for (std::size_t i = 0; i < hs.plan.units[un].tensors.size(); ++i) {
      const std::string name = hs.full_name(un, i);
      const bool bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
      const bool norm_w = name.find("norm.weight") != std::string::npos;
      std::vector<float> v(hs.numel(un, i));
      for (float& x : v) x = round_to(static_cast<float>(norm_w ? 1.0 + 0.2 * u(rng) : (bias ? 0.1 : 0.17) * u(rng)), hs.cfg.dtype);
      hs.upload(hs.params[un][i], v);
      out[name] = Vec(v.begin(), v.end());
    }
  return out;
}

// ||got - ref|| / ||scale|| (scale: ref itself unless given).
double rel_l2(const std::vector<float>& got, const Vec& ref, const Vec* scale = nullptr) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double s = scale ? (*scale)[i] : ref[i];
    num += (got[i] - ref[i]) * (got[i] - ref[i]), den += s * s;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// The key bias's exact gradient is zero (softmax ignores a constant added to a row of scores, and
// q . b_k is one), so relative to itself it is all rounding: it is measured against the size of the
// terms it sums instead.
bool exactly_zero_gradient(const std::string& name) {
  return name.size() >= 11 && name.compare(name.size() - 11, 11, "attn.k.bias") == 0;
}

// Gradients of all tensors after one forward + backward, by full name.
std::map<std::string, std::vector<float>> run_step(Harness& hs) {
  hs.zero_grads();
  hs.forward();
  hs.backward();
  std::map<std::string, std::vector<float>> g;
  for (std::size_t un = 0; un < hs.plan.units.size(); ++un)
    for (std::size_t i = 0; i < hs.plan.units[un].tensors.size(); ++i)
      g[hs.full_name(un, i)] = hs.download(hs.grads[un][i], hs.numel(un, i));
  return g;
}

void check_against_reference(const Variant& v, double tol) {
  ZK_REQUIRE_GPU();
  Harness hs(tiny(v));
  const Params p = random_params(hs, 7);
  hs.load_batch(3);
  hs.zero_grads();
  hs.forward();
  const float loss = hs.loss();
  const auto logits = hs.logits();
  hs.backward();

  CpuReference ref(hs.cfg, p);
  const double ref_loss = ref.run(hs.host_tokens, hs.host_targets);
  const double loss_err = std::abs(loss - ref_loss) / std::abs(ref_loss);
  const double logit_err = rel_l2(logits, ref.logits());
  EXPECT_EQ(hs.cfg.flash_attention, v.flash);
  std::printf("  [%s%s %s%s%s] loss %.6f (ref %.6f, rel err %.2e), logits rel err %.2e\n", v.gpt ? "gpt" : "llama",
              v.tied ? " tied" : "", dtype_name(hs.cfg.dtype), v.checkpointing ? " ckpt" : "", v.flash ? " flash" : "", loss, ref_loss, loss_err,
              logit_err);
  EXPECT_LE(loss_err, tol);
  EXPECT_LE(logit_err, tol);
  double worst = 0;
  std::string worst_name;
  int checked = 0;
  for (std::size_t un = 0; un < hs.plan.units.size(); ++un)
    for (std::size_t i = 0; i < hs.plan.units[un].tensors.size(); ++i) {
      const std::string name = hs.full_name(un, i);
      const Vec* scale = exactly_zero_gradient(name) ? &ref.bias_grad_scale().at(name) : nullptr;
      const double e = rel_l2(hs.download(hs.grads[un][i], hs.numel(un, i)), ref.grads().at(name), scale);
      EXPECT_LE(e, tol) << "gradient of " << name;
      if (e > worst) worst = e, worst_name = name;
      ++checked;
    }
  std::printf("  %d parameter gradients, worst rel err %.2e (%s)\n", checked, worst, worst_name.c_str());
}

TEST(ModelGpu, LlamaStyleFp32MatchesDoubleReference) { check_against_reference({false, false, zsim::Precision::fp32}, 1e-4); }
TEST(ModelGpu, LlamaStyleBf16MatchesDoubleReference) { check_against_reference({false, false, zsim::Precision::bf16}, 2e-2); }
TEST(ModelGpu, GptStyleTiedFp32MatchesDoubleReference) { check_against_reference({true, true, zsim::Precision::fp32}, 1e-4); }
TEST(ModelGpu, GptStyleUntiedFp32MatchesDoubleReference) { check_against_reference({true, false, zsim::Precision::fp32}, 1e-4); }
TEST(ModelGpu, GptStyleTiedBf16MatchesDoubleReference) { check_against_reference({true, true, zsim::Precision::bf16}, 2e-2); }
TEST(ModelGpu, LlamaStyleTiedFp16MatchesDoubleReference) { check_against_reference({false, true, zsim::Precision::fp16}, 2e-2); }
TEST(ModelGpu, CheckpointedFp32MatchesDoubleReference) { check_against_reference({true, false, zsim::Precision::fp32, true}, 1e-4); }

TEST(ModelGpu, LlamaStyleBf16FlashMatchesDoubleReference) {
  check_against_reference({false, false, zsim::Precision::bf16, false, true}, 2e-2);
}
TEST(ModelGpu, GptStyleTiedFp16FlashCheckpointedMatchesDoubleReference) {
  check_against_reference({true, true, zsim::Precision::fp16, true, true}, 2e-2);
}

TEST(ModelGpu, RecomputeUnderCheckpointingGivesTheGradientsOfTheFullRun) {
  ZK_REQUIRE_GPU();
  for (const bool gpt : {false, true}) {
    Harness full(tiny({gpt, gpt, zsim::Precision::fp32, false}));
    Harness ckpt(tiny({gpt, gpt, zsim::Precision::fp32, true}));
    ASSERT_TRUE(ckpt.cfg.checkpointing);
    EXPECT_LT(ckpt.model->layout().layer_bytes(true), full.model->layout().layer_bytes(false));
    random_params(full, 11), random_params(ckpt, 11);
    full.load_batch(0), ckpt.load_batch(0);
    const auto a = run_step(full), b = run_step(ckpt);
    EXPECT_EQ(full.loss(), ckpt.loss());
    for (const auto& [name, g] : a) EXPECT_LE(rel_l2(b.at(name), Vec(g.begin(), g.end())), 1e-6) << name;
  }
}

TEST(ModelGpu, RepeatedStepGivesBitwiseIdenticalLossAndGradients) {
  ZK_REQUIRE_GPU();
  Harness hs(tiny({true, true, zsim::Precision::bf16, true}));  // tied: embedding rows get head + lookup terms
  random_params(hs, 3);
  hs.load_batch(2);
  const auto a = run_step(hs);
  const float la = hs.loss();
  const auto b = run_step(hs);
  EXPECT_EQ(la, hs.loss());
  for (const auto& [name, g] : a) EXPECT_EQ(g, b.at(name)) << name;
}

TEST(ModelGpu, BackwardAccumulatesIntoTheCallersGradients) {
  ZK_REQUIRE_GPU();
  Harness hs(tiny({true, false, zsim::Precision::fp32, false}));
  random_params(hs, 5);
  hs.load_batch(1);
  const auto once = run_step(hs);
  hs.forward();
  hs.backward();  // no zeroing: a second micro-step on top
  for (std::size_t un = 0; un < hs.plan.units.size(); ++un)
    for (std::size_t i = 0; i < hs.plan.units[un].tensors.size(); ++i) {
      const std::string name = hs.full_name(un, i);
      const auto twice = hs.download(hs.grads[un][i], hs.numel(un, i));
      Vec expect(once.at(name).begin(), once.at(name).end());
      for (double& x : expect) x *= 2;
      EXPECT_LE(rel_l2(twice, expect), 1e-6) << name;
    }
}

}  // namespace
}  // namespace zrun::model::test
