// Files a scenario names: deepspeed.ds_config (DeepSpeed JSON), model.hf_config (HF config.json) and
// cluster.profile (hardware profile); relative paths resolve against the scenario file's directory.
#include <gtest/gtest.h>

#include "sim/scenario/scenario_test_util.hpp"

namespace zsim {
using testing::error_of;
using testing::parse;

const std::string kCluster = "cluster: {gpu: h100-80gb, gpus_per_node: 8, host: {memory_bytes: 2TB}, links: "
                             "{nvlink_GBps: 450, pcie_GBps: 55}}\n";

TEST(ExternalFiles, DsConfigSuppliesTheDeepSpeedBlock) {
  Scenario s = parse("model: {preset: llama2-13b}\n" + kCluster + "deepspeed: {ds_config: ds_config.json}\n");
  EXPECT_EQ(s.training.micro_batch, 2);
  EXPECT_EQ(s.training.grad_accum, 4);
  EXPECT_EQ(s.training.precision, Precision::bf16);
  EXPECT_EQ(s.zero.stage, 3);
  EXPECT_TRUE(s.zero.overlap_comm);  // stage 3 default
  EXPECT_EQ(s.zero.reduce_bucket_size, 50'000'000);
  EXPECT_EQ(s.zero.stage3_prefetch_bucket_size, static_cast<std::int64_t>(0.9 * 5120 * 5120));  // auto
  EXPECT_EQ(s.zero.stage3_param_persistence_threshold, 10 * 5120);                              // auto
  EXPECT_EQ(s.zero.offload_optimizer.device, OffloadDevice::cpu);
  EXPECT_TRUE(s.zero.offload_optimizer.pin_memory);
  // gradient_clipping, optimizer: warnings located in the JSON file (round_robin_gradients is modelled).
  EXPECT_TRUE(s.zero.round_robin_gradients);
  ASSERT_EQ(s.warnings.size(), 2u);
  for (const auto& w : s.warnings) EXPECT_NE(w.find("testdata/ds_config.json:"), std::string::npos) << w;
}

TEST(ExternalFiles, ScenarioDeepSpeedKeysOverrideTheDsConfig) {
  Scenario s = parse("model: {preset: llama2-13b}\n" + kCluster +
                     "deepspeed:\n  ds_config: ds_config.json\n  zero_optimization: {reduce_bucket_size: 1000}\n");
  EXPECT_EQ(s.zero.reduce_bucket_size, 1000);
  EXPECT_EQ(s.zero.stage, 3);  // the rest still from the file
}

TEST(ExternalFiles, SetOverridesTheDsConfigToo) {
  Scenario s = parse("model: {preset: llama2-13b}\n" + kCluster + "deepspeed: {ds_config: ds_config.json}\n",
                     {"deepspeed.zero_optimization.stage=2", "deepspeed.zero_optimization.overlap_comm=true"});
  EXPECT_EQ(s.zero.stage, 2);
}

TEST(ExternalFiles, BadValueInDsConfigIsLocatedInTheJsonFile) {
  auto e = error_of("model: {preset: llama2-13b}\n" + kCluster + "deepspeed: {ds_config: ds_config_bad_stage.json}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().file, "sim/scenario/testdata/ds_config_bad_stage.json");
  EXPECT_EQ(e->where().line, 3);
  EXPECT_EQ(e->where().column, 14);
  EXPECT_EQ(e->where().key_path, "deepspeed.zero_optimization.stage");
}

TEST(ExternalFiles, JsonSyntaxErrorHasLineAndColumn) {
  auto e = error_of("model: {preset: llama2-13b}\n" + kCluster + "deepspeed: {ds_config: ds_config_syntax.json}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().file, "sim/scenario/testdata/ds_config_syntax.json");
  EXPECT_EQ(e->where().line, 3);
  EXPECT_GT(e->where().column, 0);
}

TEST(ExternalFiles, MissingDsConfigNamesTheKeyThatReferencesIt) {
  auto e = error_of("model: {preset: llama2-13b}\n" + kCluster + "deepspeed: {ds_config: nope.json}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().file, testing::kTestFile);
  EXPECT_EQ(e->where().line, 3);
  EXPECT_EQ(e->where().column, 24);
  EXPECT_EQ(e->where().key_path, "deepspeed.ds_config");
  EXPECT_NE(std::string(e->what()).find("sim/scenario/testdata/nope.json"), std::string::npos) << e->what();
}

TEST(ExternalFiles, HfConfigOfAGqaLlama) {
  Scenario s = parse("model: {hf_config: hf_llama.json}\n" + kCluster);
  const ModelSpec& m = s.model;
  EXPECT_EQ(m.name, "hf_llama.json");
  EXPECT_EQ(m.layers, 32);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.ffn_hidden, 14336);
  EXPECT_EQ(m.heads, 32);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.vocab, 128256);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_EQ(m.max_position_embeddings, 0);  // rotary
  EXPECT_EQ(m.mlp, MlpKind::gated);
  EXPECT_FALSE(m.bias);
}

TEST(ExternalFiles, HfConfigOfGpt2UsesItsOwnKeyNamesAndLearnedPositions) {
  const ModelSpec m = parse("model: {hf_config: hf_gpt2.json}\n" + kCluster).model;
  EXPECT_EQ(m.hidden, 1600);
  EXPECT_EQ(m.layers, 48);
  EXPECT_EQ(m.heads, 25);
  EXPECT_EQ(m.kv_heads, 25);
  EXPECT_EQ(m.ffn_hidden, 6400);  // n_inner null -> 4 x hidden
  EXPECT_EQ(m.max_position_embeddings, 1024);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_EQ(m.mlp, MlpKind::plain);
  EXPECT_TRUE(m.bias);
  // Same shape as the preset.
  const ModelSpec p = parse("model: {preset: gpt2-1.5b}\n" + kCluster).model;
  EXPECT_EQ(m.vocab, p.vocab);
  EXPECT_EQ(m.ffn_hidden, p.ffn_hidden);
}

// transformers' default attention (SDPA) and Llama's configs: flash attention, no dropout.
TEST(ExternalFiles, HfConfigWithoutAttentionImplementationIsFlashWithoutDropout) {
  const ModelSpec m = parse("model: {hf_config: hf_llama.json}\n" + kCluster).model;
  EXPECT_EQ(m.attention, Attention::flash);
  EXPECT_EQ(m.attention_dropout, 0.0);
  EXPECT_EQ(m.hidden_dropout, 0.0);
}

TEST(ExternalFiles, HfConfigAttentionImplementationAndDropoutAreRead) {
  const ModelSpec m = parse("model: {hf_config: hf_mistral_eager.json}\n" + kCluster).model;
  EXPECT_EQ(m.attention, Attention::eager);
  EXPECT_DOUBLE_EQ(m.attention_dropout, 0.05);
  EXPECT_EQ(m.hidden_dropout, 0.0);
  const ModelSpec g = parse("model: {hf_config: hf_gpt2.json}\n" + kCluster).model;  // GPT-2's key names
  EXPECT_DOUBLE_EQ(g.attention_dropout, 0.1);
  EXPECT_DOUBLE_EQ(g.hidden_dropout, 0.1);
}

TEST(ExternalFiles, ScenarioAttentionOverridesTheHfConfig) {
  const ModelSpec m = parse("model: {hf_config: hf_mistral_eager.json, attention: flash, attention_dropout: 0}\n" +
                            kCluster).model;
  EXPECT_EQ(m.attention, Attention::flash);
  EXPECT_EQ(m.attention_dropout, 0.0);
}

TEST(ExternalFiles, UnknownHfAttentionImplementationIsLocatedInTheConfig) {
  auto e = error_of("model: {hf_config: hf_bad_attn.json}\n" + kCluster);
  ASSERT_TRUE(e);
  EXPECT_NE(e->where().file.find("hf_bad_attn.json"), std::string::npos);
  EXPECT_EQ(e->where().line, 2);
  EXPECT_NE(std::string(e->what()).find("unknown attention implementation 'paged'"), std::string::npos) << e->what();
}

TEST(ExternalFiles, HfConfigFieldsCanBeOverriddenExplicitly) {
  const ModelSpec m = parse("model: {hf_config: hf_llama.json, layers: 2}\n" + kCluster).model;
  EXPECT_EQ(m.layers, 2);
  EXPECT_EQ(m.hidden, 4096);
}

TEST(ExternalFiles, MissingHfConfigIsAnError) {
  auto e = error_of("model: {hf_config: missing.json}\n" + kCluster);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "model.hf_config");
  EXPECT_EQ(e->where().line, 1);
}

TEST(ExternalFiles, PresetAndHfConfigTogetherIsAnError) {
  auto e = error_of("model: {preset: llama2-7b, hf_config: hf_llama.json}\n" + kCluster);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "model.hf_config");
}

TEST(ExternalFiles, UnknownProfileListsWhereItLooked) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster: {profile: no-such-hgx}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "cluster.profile");
  EXPECT_NE(std::string(e->what()).find("no-such-hgx.yaml"), std::string::npos) << e->what();
}

TEST(ExternalFiles, ProfileMayNotSetNodes) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster: {profile: bad-profile}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().file, "sim/scenario/testdata/bad-profile.yaml");
  EXPECT_EQ(e->where().key_path, "cluster.nodes");
}

TEST(ExternalFiles, ProfileNameCannotEscapeTheSearchDirectories) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster: {profile: ../../etc/passwd}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "cluster.profile");
}


// Issue 59: the one profile validate/deepspeed/calibrate_node.py writes (testdata/test-node-deepspeed.yaml, written by
// its tests' fake machine) loads through cluster.profile: the GPU preset with the measured memory, torch's figures,
// DeepSpeed's host figures at the session's reference loop, the memory outside the allocator and the stack.
TEST(ExternalFiles, TheProfileCalibrateNodeWritesLoads) {
  Scenario s = parse("model: {preset: llama2-7b}\ncluster: {profile: test-node-deepspeed, nodes: 1, gpus_per_node: 8, "
                     "links: {nvlink_GBps: 370}}\n");
  EXPECT_EQ(s.cluster.gpu.hbm_bytes, 150109880320);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.hbm_GBps, 4800);
  EXPECT_NEAR(s.cluster.efficiency.gemm, 0.668, 1e-3);
  EXPECT_GT(s.cluster.efficiency.hbm_by_kind.norm, 0);
  EXPECT_TRUE(s.cluster.efficiency.torch_misaligned_gemm.present());
  EXPECT_EQ(s.cluster.efficiency.outside_allocator_bytes, Bytes{1300000032});
  EXPECT_TRUE(s.cluster.efficiency.deepspeed_host.present());
  EXPECT_EQ(s.cluster.efficiency.deepspeed_host.reference_loop_us, 2000.0);
  EXPECT_EQ(s.cluster.efficiency.deepspeed_host.loop_speed_exponent, 0.35);
  EXPECT_EQ(s.cluster.fitted_under.deepspeed, "0.14.5");
  EXPECT_EQ(s.cluster.fitted_under.transformers, "5.17.0");
  EXPECT_EQ(s.cluster.fitted_under.gpu, "NVIDIA H200");
  EXPECT_EQ(s.cluster.efficiency.cpu_adam_measured.at(1).size(), 5u);
}

TEST(ExternalFiles, AMixtureOfExpertsBlockNamedAsALeafModuleIsTakenAndTheExpertsClassChangesNothing) {
  const ModelSpec leaf =
      parse("model: {hf_config: hf_mixtral_small.json, z3_leaf_modules: MixtralSparseMoeBlock}\n" + kCluster).model;
  EXPECT_TRUE(moe_block_is_leaf(leaf));
  const ModelSpec experts =
      parse("model: {hf_config: hf_mixtral_small.json, z3_leaf_modules: MixtralExperts}\n" + kCluster).model;
  EXPECT_FALSE(moe_block_is_leaf(experts));
}

TEST(ExternalFiles, ALeafModuleClassTheModelLacksIsAnErrorAtTheKey) {
  auto e = error_of("model: {hf_config: hf_mixtral_small.json, z3_leaf_modules: LlamaDecoderLayer}\n" + kCluster);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "model.z3_leaf_modules");
  EXPECT_NE(std::string(e->what()).find("MixtralSparseMoeBlock"), std::string::npos) << e->what();
}

}  // namespace zsim
