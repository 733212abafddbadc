// The scenario format: presets, explicit fields, defaults, profiles.
#include <gtest/gtest.h>

#include "sim/scenario/scenario_json.hpp"
#include "sim/scenario/scenario_test_util.hpp"

namespace zsim {
using testing::kBase;
using testing::parse;

TEST(ScenarioParse, BaseScenarioResolvesPresetsAndBlocks) {
  Scenario s = parse(kBase);
  EXPECT_EQ(s.source_file, testing::kTestFile);
  EXPECT_EQ(s.model.name, "llama2-7b");
  EXPECT_EQ(s.model.layers, 32);
  EXPECT_EQ(s.model.hidden, 4096);
  EXPECT_EQ(s.cluster.gpu.name, "a100-80gb");
  EXPECT_EQ(s.cluster.gpu.hbm_bytes, 80 * kGiB);
  EXPECT_EQ(s.cluster.host.memory_bytes, 1'000'000'000'000);
  EXPECT_EQ(s.world_size(), 8);
  EXPECT_EQ(s.training.seq_len, 4096);
  EXPECT_EQ(s.zero.stage, 2);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(ScenarioParse, RuntimeIsDeepSpeedUnlessTheFileSaysZrun) {
  EXPECT_EQ(parse(kBase).runtime, RuntimeKind::deepspeed);
  EXPECT_EQ(parse(kBase + "runtime: zrun\n").runtime, RuntimeKind::zrun);
  EXPECT_EQ(parse(kBase, {"runtime=zrun"}).runtime, RuntimeKind::zrun);
}

TEST(ScenarioParse, ExplicitModelFieldsOverrideThePreset) {
  Scenario s = parse(kBase + "", {"model.layers=4", "model.vocab=1000"});
  EXPECT_EQ(s.model.layers, 4);
  EXPECT_EQ(s.model.vocab, 1000);
  EXPECT_EQ(s.model.hidden, 4096);  // still the preset's
}

TEST(ScenarioParse, FullyExplicitModelNeedsNoPreset) {
  Scenario s = parse(R"(model: {layers: 2, hidden: 256, heads: 4, vocab: 1000, mlp: plain, bias: true}
cluster: {gpu: h100-80gb}
)");
  EXPECT_EQ(s.model.name, "custom");
  EXPECT_EQ(s.model.ffn_hidden, 1024);  // plain MLP default: 4 x hidden
  EXPECT_EQ(s.model.kv_heads, 4);       // no GQA unless asked
  EXPECT_TRUE(s.model.bias);
  EXPECT_EQ(s.world_size(), 1);
}

TEST(ScenarioParse, ChangingHeadsOfAMultiHeadPresetKeepsKvEqualToHeads) {
  EXPECT_EQ(parse(kBase, {"model.heads=16"}).model.kv_heads, 16);   // llama2-7b: MHA
  EXPECT_EQ(parse(kBase, {"model.preset=llama2-70b", "model.heads=32"}).model.kv_heads, 8);  // GQA kept
}

TEST(ScenarioParse, ExplicitGpuBlockWithPresetOverridesFieldByField) {
  Scenario s = parse(kBase, {"cluster.gpu.hbm_bytes=40GiB"});
  EXPECT_EQ(s.cluster.gpu.hbm_bytes, 40 * kGiB);
  EXPECT_DOUBLE_EQ(s.cluster.gpu.hbm_GBps, 2039);  // rest from a100-80gb
}

TEST(ScenarioParse, TrainingDefaults) {
  Scenario s = parse(R"(model: {preset: gpt2-1.5b}
cluster: {gpu: v100-32gb}
)");
  EXPECT_EQ(s.training.micro_batch, 1);
  EXPECT_EQ(s.training.grad_accum, 1);
  EXPECT_EQ(s.training.seq_len, 2048);
  EXPECT_EQ(s.training.precision, Precision::bf16);
  EXPECT_EQ(s.training.activation_checkpointing, Checkpointing::full);
  EXPECT_EQ(s.zero.stage, 0);
}

TEST(ScenarioParse, TrainingEnums) {
  Scenario s = parse(kBase, {"training.precision=fp16", "training.activation_checkpointing=none"});
  EXPECT_EQ(s.training.precision, Precision::fp16);
  EXPECT_EQ(s.training.activation_checkpointing, Checkpointing::none);
}

TEST(ScenarioParse, HardwareProfileIsTheBaseOfTheClusterBlock) {
  Scenario s = parse(R"(model: {preset: llama2-7b}
cluster:
  profile: test-hgx
  nodes: 2
  links: {ib_GBps: 25}
)");
  const ClusterSpec& c = s.cluster;
  EXPECT_EQ(c.profile, "test-hgx");
  EXPECT_EQ(c.nodes, 2);
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.gpu.name, "fixture-gpu");
  EXPECT_EQ(c.gpu.hbm_bytes, 1000);
  EXPECT_EQ(c.host.memory_bytes, 2'000'000'000'000);
  EXPECT_EQ(c.host.cores, 96);
  EXPECT_EQ(c.nvme.bytes, 30'000'000'000'000);
  EXPECT_DOUBLE_EQ(c.nvme.read_GBps, 25);
  EXPECT_DOUBLE_EQ(c.nvme.write_GBps, 12);
  EXPECT_DOUBLE_EQ(c.links.nvlink_GBps, 450);
  EXPECT_DOUBLE_EQ(c.links.pcie_GBps, 55);
  EXPECT_DOUBLE_EQ(c.links.ib_GBps, 25);  // the scenario's, over the profile's 50
  EXPECT_DOUBLE_EQ(c.links.nvlink_latency_us, 1.5);
  EXPECT_DOUBLE_EQ(c.links.pcie_latency_us, 2.5);
  EXPECT_DOUBLE_EQ(c.links.ib_latency_us, 4.5);
  EXPECT_DOUBLE_EQ(c.links.ib_oversubscription, 2);
  EXPECT_EQ(c.links.nodes_per_leaf, 16);
  EXPECT_DOUBLE_EQ(c.efficiency.gemm, 0.7);
  EXPECT_DOUBLE_EQ(c.efficiency.hbm, 0.85);
  EXPECT_DOUBLE_EQ(c.efficiency.cpu_adam_params_per_s_per_core, 2.0e8);
  EXPECT_DOUBLE_EQ(c.efficiency.cpu_adam_node_params_per_s, 5.0e9);
  EXPECT_DOUBLE_EQ(c.efficiency.pageable_pcie_fraction, 0.4);
}

// CPU Adam's node ceiling (zrun calibrate): from a profile or the scenario, 0 (no ceiling) when absent, in the
// resolved scenario's JSON only where given (data-sheet reports keep their fields), never negative.
TEST(ScenarioParse, TheCpuAdamNodeCeilingIsReadAndWrittenOnlyWhereGiven) {
  const Scenario without = parse(kBase);
  EXPECT_EQ(without.cluster.efficiency.cpu_adam_node_params_per_s, 0.0);
  EXPECT_FALSE(scenario_to_json(without)["cluster"]["efficiency"].contains("cpu_adam_node_params_per_s"));
  const Scenario with = parse(kBase, {"cluster.efficiency.cpu_adam_node_params_per_s=4.74e9"});
  EXPECT_DOUBLE_EQ(with.cluster.efficiency.cpu_adam_node_params_per_s, 4.74e9);
  EXPECT_DOUBLE_EQ(scenario_to_json(with)["cluster"]["efficiency"]["cpu_adam_node_params_per_s"].get<double>(), 4.74e9);
  std::string text = kBase;
  const std::string links = "  links: {nvlink_GBps: 300, pcie_GBps: 25, ib_GBps: 25}\n";
  ASSERT_NE(text.find(links), std::string::npos);
  text.insert(text.find(links) + links.size(),
              "  efficiency: {cpu_adam_params_per_s_per_core: 2.3e8, cpu_adam_node_params_per_s: 4.74e9}\n");
  const Scenario block = parse(text);
  EXPECT_DOUBLE_EQ(block.cluster.efficiency.cpu_adam_params_per_s_per_core, 2.3e8);
  EXPECT_DOUBLE_EQ(block.cluster.efficiency.cpu_adam_node_params_per_s, 4.74e9);
  EXPECT_DOUBLE_EQ(parse(kBase, {"cluster.efficiency.cpu_adam_node_params_per_s=0"}).cluster.efficiency.cpu_adam_node_params_per_s, 0.0);
  const auto bad = testing::error_of(kBase, {"cluster.efficiency.cpu_adam_node_params_per_s=-1"});
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->where().key_path, "cluster.efficiency.cpu_adam_node_params_per_s");
  EXPECT_NE(std::string(bad->what()).find("0 = no ceiling"), std::string::npos) << bad->what();
}

// CPU Adam's measured rates (zrun calibrate): one key per rank count and thread count, read into ascending threads per
// rank count, echoed in the resolved scenario's JSON under the same keys; absent, the block is empty and not written.
TEST(ScenarioParse, TheMeasuredCpuAdamRatesAreReadPerRankCountInAscendingThreadsAndEchoed) {
  const Scenario without = parse(kBase);
  EXPECT_TRUE(without.cluster.efficiency.cpu_adam_measured.empty());
  EXPECT_FALSE(scenario_to_json(without)["cluster"]["efficiency"].contains("cpu_adam_measured"));
  const Scenario with = parse(kBase, {"cluster.efficiency.cpu_adam_measured.ranks_2.threads_8=1.9e9",
                                      "cluster.efficiency.cpu_adam_measured.ranks_2.threads_2=6e8",
                                      "cluster.efficiency.cpu_adam_measured.ranks_1.threads_16=3.9e9"});
  const auto& m = with.cluster.efficiency.cpu_adam_measured;
  ASSERT_EQ(m.size(), 2u);
  const std::vector<std::pair<double, double>> two{{2, 6e8}, {8, 1.9e9}};
  EXPECT_EQ(m.at(2), two);
  EXPECT_EQ(m.at(1), (std::vector<std::pair<double, double>>{{16, 3.9e9}}));
  const auto j = scenario_to_json(with)["cluster"]["efficiency"]["cpu_adam_measured"];
  EXPECT_DOUBLE_EQ(j["ranks_2"]["threads_8"].get<double>(), 1.9e9);
  EXPECT_DOUBLE_EQ(j["ranks_1"]["threads_16"].get<double>(), 3.9e9);
}

// A calibrated profile's flash-attention efficiencies reach the resolved scenario and its JSON (the report's
// `scenario`); without them the JSON has no such block, as before the key existed.
TEST(ScenarioParse, TheFlashAttentionEfficienciesAreWrittenOnlyWhereGiven) {
  const Scenario without = parse(kBase);
  EXPECT_FALSE(scenario_to_json(without)["cluster"]["efficiency"].contains("flash_attention"));
  const Scenario with = parse(kBase, {"cluster.efficiency.flash_attention.forward=0.32",
                                      "cluster.efficiency.flash_attention.backward=0.27"});
  const auto j = scenario_to_json(with)["cluster"]["efficiency"]["flash_attention"];
  EXPECT_DOUBLE_EQ(j["forward"].get<double>(), 0.32);
  EXPECT_DOUBLE_EQ(j["backward"].get<double>(), 0.27);
  const Scenario forward_only = parse(kBase, {"cluster.efficiency.flash_attention.forward=0.32"});
  EXPECT_FALSE(scenario_to_json(forward_only)["cluster"]["efficiency"]["flash_attention"].contains("backward"));
}

// Stage 3's checkpointing figures of DeepSpeed's host are optional: absent, they stay unset (the forward's figure
// prices them) and the JSON has no such key; given, they are read and echoed as given.
TEST(ScenarioParse, TheStageThreeCheckpointingHostFiguresAreReadAndWrittenOnlyWhereGiven) {
  const std::string host = "cluster.efficiency.deepspeed_host.";
  const Scenario without = parse(kBase, {host + "stage3_forward_module_us=270"});
  const auto& h = without.cluster.efficiency.deepspeed_host;
  EXPECT_FALSE(h.stage3_checkpoint_forward_module_us.has_value());
  EXPECT_FALSE(h.stage3_recompute_module_us.has_value());
  const auto j = scenario_to_json(without)["cluster"]["efficiency"]["deepspeed_host"];
  EXPECT_FALSE(j.contains("stage3_checkpoint_forward_module_us"));
  EXPECT_FALSE(j.contains("stage3_recompute_module_us"));
  const Scenario with = parse(kBase, {host + "stage3_forward_module_us=270",
                                      host + "stage3_checkpoint_forward_module_us=120",
                                      host + "stage3_recompute_module_us=0"});
  EXPECT_EQ(with.cluster.efficiency.deepspeed_host.stage3_checkpoint_forward_module_us, 120.0);
  EXPECT_EQ(with.cluster.efficiency.deepspeed_host.stage3_recompute_module_us, 0.0);  // given 0: costs nothing
  const auto jw = scenario_to_json(with)["cluster"]["efficiency"]["deepspeed_host"];
  EXPECT_DOUBLE_EQ(jw["stage3_checkpoint_forward_module_us"].get<double>(), 120);
  EXPECT_DOUBLE_EQ(jw["stage3_recompute_module_us"].get<double>(), 0);
}

TEST(ScenarioParse, StageOnesReductionFigureIsReadAndWrittenOnlyWhereGiven) {
  const std::string host = "cluster.efficiency.deepspeed_host.";
  const Scenario without = parse(kBase, {host + "stage12_reduce_param_us=50"});
  EXPECT_FALSE(without.cluster.efficiency.deepspeed_host.stage1_reduce_param_us.has_value());
  EXPECT_FALSE(scenario_to_json(without)["cluster"]["efficiency"]["deepspeed_host"].contains("stage1_reduce_param_us"));
  const Scenario with = parse(kBase, {host + "stage12_reduce_param_us=50", host + "stage1_reduce_param_us=0"});
  EXPECT_EQ(with.cluster.efficiency.deepspeed_host.stage1_reduce_param_us, 0.0);  // given 0: costs nothing
  EXPECT_DOUBLE_EQ(
      scenario_to_json(with)["cluster"]["efficiency"]["deepspeed_host"]["stage1_reduce_param_us"].get<double>(), 0);
}

TEST(ScenarioParse, TheHostsSpeedIsReadAndWrittenOnlyWhereGiven) {
  const std::string host = "cluster.efficiency.deepspeed_host.";
  const Scenario without = parse(kBase, {host + "stage12_reduce_param_us=50"});
  EXPECT_FALSE(without.cluster.efficiency.deepspeed_host.loop_us.has_value());
  EXPECT_FALSE(scenario_to_json(without)["cluster"]["efficiency"]["deepspeed_host"].contains("loop_us"));
  const Scenario with = parse(kBase, {host + "stage12_reduce_param_us=50", host + "reference_loop_us=2900",
                                      host + "loop_speed_exponent=0.5", host + "loop_us=1600"});
  const auto& h = with.cluster.efficiency.deepspeed_host;
  EXPECT_EQ(h.reference_loop_us, 2900.0);
  EXPECT_EQ(h.loop_speed_exponent, 0.5);
  EXPECT_EQ(h.loop_us, 1600.0);
  EXPECT_DOUBLE_EQ(
      scenario_to_json(with)["cluster"]["efficiency"]["deepspeed_host"]["loop_us"].get<double>(), 1600);
  EXPECT_FALSE(h.autograd_loop_us.has_value());
  EXPECT_FALSE(scenario_to_json(with)["cluster"]["efficiency"]["deepspeed_host"].contains("autograd_loop_us"));
  const Scenario both = parse(kBase, {host + "stage12_reduce_param_us=50", host + "reference_loop_us=2900",
                                      host + "loop_speed_exponent=0.5", host + "loop_us=1600",
                                      host + "autograd_loop_us=2400"});
  EXPECT_EQ(both.cluster.efficiency.deepspeed_host.autograd_loop_us, 2400.0);
  EXPECT_DOUBLE_EQ(
      scenario_to_json(both)["cluster"]["efficiency"]["deepspeed_host"]["autograd_loop_us"].get<double>(), 2400);
}

TEST(ScenarioParse, TorchsMisalignedGemmFiguresAreReadAndWrittenOnlyWhereGiven) {
  const Scenario without = parse(kBase);
  EXPECT_FALSE(without.cluster.efficiency.torch_misaligned_gemm.present());
  EXPECT_FALSE(scenario_to_json(without)["cluster"]["efficiency"].contains("torch_misaligned_gemm"));
  const Scenario with = parse(kBase, {"cluster.efficiency.torch_misaligned_gemm.forward=0.096",
                                      "cluster.efficiency.torch_misaligned_gemm.backward=0.148"});
  EXPECT_DOUBLE_EQ(with.cluster.efficiency.torch_misaligned_gemm.forward, 0.096);
  EXPECT_DOUBLE_EQ(with.cluster.efficiency.torch_misaligned_gemm.backward, 0.148);
  const auto j = scenario_to_json(with)["cluster"]["efficiency"]["torch_misaligned_gemm"];
  EXPECT_DOUBLE_EQ(j["forward"].get<double>(), 0.096);
  EXPECT_DOUBLE_EQ(j["backward"].get<double>(), 0.148);
}

TEST(ScenarioParse, AGpuPresetInTheScenarioReplacesTheProfilesGpu) {
  Scenario s = parse(R"(model: {preset: llama2-7b}
cluster: {profile: test-hgx, gpu: h200-141gb}
)");
  EXPECT_EQ(s.cluster.gpu.name, "h200-141gb");
  EXPECT_EQ(s.cluster.gpu.hbm_bytes, 141 * kGiB);
  EXPECT_DOUBLE_EQ(s.cluster.links.nvlink_GBps, 450);  // the rest of the profile stays
}

// Issue 59: the stack a profile's figures were fitted under is read as written and echoed in the resolved scenario's
// JSON, field by field; absent, the block is empty and not written.
TEST(ScenarioParse, TheFittedUnderBlockIsReadAsWrittenAndEchoedOnlyWhereGiven) {
  const Scenario without = parse(kBase);
  EXPECT_FALSE(without.cluster.fitted_under.present());
  EXPECT_FALSE(scenario_to_json(without)["cluster"].contains("fitted_under"));
  const Scenario with = parse(kBase, {"cluster.fitted_under.deepspeed=0.14.5", "cluster.fitted_under.torch=2.11.0+cu130",
                                      "cluster.fitted_under.date=2026-12-03"});
  EXPECT_EQ(with.cluster.fitted_under.deepspeed, "0.14.5");
  EXPECT_EQ(with.cluster.fitted_under.torch, "2.11.0+cu130");
  EXPECT_EQ(with.cluster.fitted_under.transformers, "");
  const auto j = scenario_to_json(with)["cluster"]["fitted_under"];
  EXPECT_EQ(j, nlohmann::ordered_json({{"deepspeed", "0.14.5"}, {"torch", "2.11.0+cu130"}, {"date", "2026-12-03"}}));
}

TEST(ScenarioParse, AnUnknownFittedUnderFieldIsRefusedByName) {
  const auto bad = testing::error_of(kBase, {"cluster.fitted_under.pytorch=2.11"});
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(std::string(bad->what()).find("pytorch"), std::string::npos) << bad->what();
}

// The memory outside the allocator: unset unless given (the report then takes its default under runtime deepspeed); a
// given 0 stays 0 and is echoed.
TEST(ScenarioParse, TheOutsideAllocatorFigureIsUnsetUnlessGivenAndAGivenZeroStays) {
  const Scenario without = parse(kBase);
  EXPECT_FALSE(without.cluster.efficiency.outside_allocator_bytes.has_value());
  EXPECT_FALSE(scenario_to_json(without)["cluster"]["efficiency"].contains("outside_allocator_bytes"));
  const Scenario zero = parse(kBase, {"cluster.efficiency.outside_allocator_bytes=0"});
  EXPECT_EQ(zero.cluster.efficiency.outside_allocator_bytes, Bytes{0});
  EXPECT_EQ(scenario_to_json(zero)["cluster"]["efficiency"]["outside_allocator_bytes"], 0);
  EXPECT_EQ(parse(kBase, {"cluster.efficiency.outside_allocator_bytes=1.5GiB"}).cluster.efficiency.outside_allocator_bytes,
            Bytes{1536} * kMiB);
}

}  // namespace zsim
