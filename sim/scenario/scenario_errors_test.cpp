// Bad input: one InputError with file:line:column, the key path, and a message that says what to fix.
#include <gtest/gtest.h>

#include "sim/scenario/scenario_test_util.hpp"
#include "sim/scenario/scenario_validate.hpp"

namespace zsim {
using testing::error_of;
using testing::kBase;
using testing::kTestFile;

#define EXPECT_ERROR_AT(err, line_, col_, key_, text_)                                 \
  do {                                                                                 \
    ASSERT_TRUE(err.has_value()) << "expected an InputError";                          \
    EXPECT_EQ(err->where().file, kTestFile) << err->what();                            \
    EXPECT_EQ(err->where().line, line_) << err->what();                                \
    EXPECT_EQ(err->where().column, col_) << err->what();                               \
    EXPECT_EQ(err->where().key_path, key_) << err->what();                             \
    EXPECT_NE(std::string(err->what()).find(text_), std::string::npos) << err->what(); \
  } while (0)

TEST(ScenarioErrors, YamlSyntaxErrorHasLineAndColumn) {
  auto e = error_of("model:\n  preset: [llama2-7b\ncluster: {}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().file, kTestFile);
  EXPECT_GE(e->where().line, 2);
  EXPECT_NE(std::string(e->what()).find("syntax error"), std::string::npos) << e->what();
}

TEST(ScenarioErrors, AnUnknownRuntimeNamesTheKeyAndTheTwoItCanBe) {
  auto e = error_of(kBase + "runtime: pytorch\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "runtime") << e->what();
  EXPECT_NE(std::string(e->what()).find("expected deepspeed or zrun"), std::string::npos) << e->what();
}

TEST(ScenarioErrors, UnknownKeySuggestsTheNearestValidKey) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster: {gpu: a100-80gb}\ndeepspeed:\n  zero_optimization:\n"
                    "    stgae: 3\n");
  EXPECT_ERROR_AT(e, 5, 5, "deepspeed.zero_optimization.stgae", "did you mean 'stage'?");
}

TEST(ScenarioErrors, UnknownTopLevelSection) {
  auto e = error_of(kBase + "trainig: {}\n");
  EXPECT_ERROR_AT(e, 15, 1, "trainig", "did you mean 'training'?");
}

TEST(ScenarioErrors, WrongTypeNamesTheValue) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster: {gpu: a100-80gb}\ndeepspeed:\n  zero_optimization:\n"
                    "    stage: three\n");
  EXPECT_ERROR_AT(e, 5, 12, "deepspeed.zero_optimization.stage", "expected an integer, got 'three'");
}

TEST(ScenarioErrors, ABlockWhereAValueBelongs) {
  auto e = error_of("model: {preset: {name: x}}\ncluster: {gpu: a100-80gb}\n");
  EXPECT_ERROR_AT(e, 1, 17, "model.preset", "expected a single value");
}

TEST(ScenarioErrors, DuplicateKey) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster: {gpu: a100-80gb}\nmodel: {preset: llama2-13b}\n");
  EXPECT_ERROR_AT(e, 3, 1, "model", "duplicate key");
}

TEST(ScenarioErrors, ZeroGpus) {
  auto e = error_of(kBase, {"cluster.gpus_per_node=0"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "cluster.gpus_per_node");
  EXPECT_EQ(e->where().file, "--set");
  auto e2 = error_of("model: {preset: llama2-7b}\ncluster:\n  gpu: a100-80gb\n  nodes: 0\n");
  EXPECT_ERROR_AT(e2, 4, 10, "cluster.nodes", "between 1 and");
}

TEST(ScenarioErrors, AGemmModelsIoOverlapIsAFraction) {
  auto e = error_of(kBase, {"cluster.efficiency.gemm_model.io_overlap=1.5"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "cluster.efficiency.gemm_model.io_overlap");
  EXPECT_NE(std::string(e->what()).find("fraction in [0, 1]"), std::string::npos) << e->what();
  EXPECT_FALSE(error_of(kBase, {"cluster.efficiency.gemm_model.io_overlap=0.5",
                                "cluster.efficiency.gemm_model.attention_shapes=true"}));
}

TEST(ScenarioErrors, TheFlashAttentionEfficienciesAreFractions) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster:\n  gpu: a100-80gb\n  efficiency:\n    flash_attention:\n"
                    "      forward: 0.4\n      backward: 1.5\n");
  EXPECT_ERROR_AT(e, 7, 17, "cluster.efficiency.flash_attention.backward", "fraction in [0, 1]");
  auto neg = error_of(kBase, {"cluster.efficiency.flash_attention.forward=-0.1"});
  ASSERT_TRUE(neg);
  EXPECT_EQ(neg->where().key_path, "cluster.efficiency.flash_attention.forward");
  const Scenario s = testing::parse(kBase, {"cluster.efficiency.flash_attention.forward=0.35",
                                            "cluster.efficiency.flash_attention.backward=0.3"});
  EXPECT_DOUBLE_EQ(s.cluster.efficiency.flash_attention.forward, 0.35);
  EXPECT_DOUBLE_EQ(s.cluster.efficiency.flash_attention.backward, 0.3);
  EXPECT_EQ(testing::parse(kBase).cluster.efficiency.flash_attention, FlashAttentionEfficiency{});  // absent: 0, 0
}

TEST(ScenarioErrors, StageOutsideZeroToThree) {
  auto e = error_of(kBase + "    overlap_comm: true\n", {"deepspeed.zero_optimization.stage=4"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.zero_optimization.stage");
  EXPECT_NE(std::string(e->what()).find("between 0 and 3"), std::string::npos) << e->what();
  auto e3 = error_of("model: {preset: llama2-7b}\ncluster: {gpu: a100-80gb}\ndeepspeed:\n  zero_optimization:\n"
                     "    stage: 5\n");
  EXPECT_ERROR_AT(e3, 5, 12, "deepspeed.zero_optimization.stage", "between 0 and 3");
}

TEST(ScenarioErrors, HpzMustDivideGpusPerNode) {
  auto e = error_of(kBase, {"deepspeed.zero_optimization.stage=3", "deepspeed.zero_optimization.zero_hpz_partition_size=3"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.zero_optimization.zero_hpz_partition_size");
  EXPECT_NE(std::string(e->what()).find("must divide gpus_per_node (8)"), std::string::npos) << e->what();
}

TEST(ScenarioErrors, HpzWithParametersOnNvmeIsRefusedAsDeepSpeedFailsOnIt) {
  auto e = error_of(kBase, {"deepspeed.zero_optimization.stage=3", "deepspeed.zero_optimization.zero_hpz_partition_size=2",
                            "deepspeed.zero_optimization.offload_param.device=nvme",
                            "deepspeed.zero_optimization.offload_param.nvme_path=/tmp"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.zero_optimization.zero_hpz_partition_size");
  EXPECT_NE(std::string(e->what()).find("no device 'nvme'"), std::string::npos) << e->what();
}

TEST(ScenarioErrors, LocoNeedsQuantizedGradients) {
  auto e = error_of(kBase + "    zeropp_loco_param: {err_beta: 0.8}\n", {"deepspeed.zero_optimization.stage=3"});
  EXPECT_ERROR_AT(e, 15, 24, "deepspeed.zero_optimization.zeropp_loco_param", "needs zero_quantized_gradients");
}

TEST(ScenarioErrors, NonPositiveBucketSize) {
  auto e = error_of(kBase + "    reduce_bucket_size: 0\n");
  EXPECT_ERROR_AT(e, 15, 25, "deepspeed.zero_optimization.reduce_bucket_size", "must be positive");
}

namespace {
// The base scenario with one `KEY=VALUE` override fails on that key, saying `what`.
void expect_override_error(const std::string& key, const std::string& value, const std::string& what) {
  auto e = error_of(kBase, {key + "=" + value});
  ASSERT_TRUE(e) << key;
  EXPECT_EQ(e->where().key_path, key);
  EXPECT_NE(std::string(e->what()).find(what), std::string::npos) << e->what();
}
}  // namespace

TEST(ScenarioErrors, AMeasuredBusBandwidthThatIsNotPositiveNamesItsKey) {
  expect_override_error("cluster.efficiency.nvlink_busbw.all_gather.1MiB", "0", "must be > 0");
}

TEST(ScenarioErrors, AMeasuredNvmeRateThatIsNotPositiveNamesItsKey) {
  expect_override_error("cluster.nvme.read_GBps_by_size.64MiB", "0", "must be > 0 GB/s");
}

TEST(ScenarioErrors, AnNvmeRateForASizeItCannotHoldIsAnUnknownKey) {
  expect_override_error("cluster.nvme.write_GBps_by_size.3MiB", "2", "unknown key '3MiB'");
}

TEST(ScenarioErrors, AMeasuredCpuAdamRateThatIsNotPositiveNamesItsKey) {
  expect_override_error("cluster.efficiency.cpu_adam_measured.ranks_2.threads_8", "-1", "must be > 0 params/s");
}

TEST(ScenarioErrors, ACpuAdamRateForAThreadCountItCannotHoldIsAnUnknownKey) {
  expect_override_error("cluster.efficiency.cpu_adam_measured.ranks_2.threads_6", "1e9", "unknown key 'threads_6'");
}

TEST(ScenarioErrors, ANegativeStageThreeRecomputeHostFigureNamesItsLine) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster:\n  gpu: a100-80gb\n  efficiency:\n    deepspeed_host:\n"
                    "      stage3_forward_module_us: 270\n      stage3_recompute_module_us: -5\n");
  EXPECT_ERROR_AT(e, 7, 35, "cluster.efficiency.deepspeed_host.stage3_recompute_module_us",
                  "must be in [0, 1e6] microseconds");
}

TEST(ScenarioErrors, AStageThreeCheckpointedForwardHostFigureThatIsNotANumberNamesItsLine) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster:\n  gpu: a100-80gb\n  efficiency:\n    deepspeed_host:\n"
                    "      stage3_checkpoint_forward_module_us: fast\n");
  EXPECT_ERROR_AT(e, 6, 44, "cluster.efficiency.deepspeed_host.stage3_checkpoint_forward_module_us",
                  "expected a number, got 'fast'");
}

TEST(ScenarioErrors, AHostSpeedOrPageableFractionOutOfRangeNamesItsLine) {
  const std::string efficiency = "model: {preset: llama2-7b}\ncluster:\n  gpu: a100-80gb\n  efficiency:\n";
  auto loop = error_of(efficiency + "    deepspeed_host:\n      reference_loop_us: 2900\n      loop_us: 0\n");
  EXPECT_ERROR_AT(loop, 7, 16, "cluster.efficiency.deepspeed_host.loop_us", "must be in (0, 1e6] microseconds");
  auto autograd = error_of(efficiency + "    deepspeed_host:\n      autograd_loop_us: -3\n");
  EXPECT_ERROR_AT(autograd, 6, 25, "cluster.efficiency.deepspeed_host.autograd_loop_us",
                  "must be in (0, 1e6] microseconds");
  auto exponent = error_of(efficiency + "    deepspeed_host:\n      loop_speed_exponent: -1\n");
  EXPECT_ERROR_AT(exponent, 6, 28, "cluster.efficiency.deepspeed_host.loop_speed_exponent", "must be in [0, 4]");
  auto h2d = error_of(efficiency + "    pageable_h2d_pcie_fraction: 1.5\n");
  EXPECT_ERROR_AT(h2d, 5, 33, "cluster.efficiency.pageable_h2d_pcie_fraction", "");
}

TEST(ScenarioErrors, AMisalignedGemmFigureAbovePeakNamesItsLine) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster:\n  gpu: a100-80gb\n  efficiency:\n    torch_misaligned_gemm:\n"
                    "      forward: 0.1\n      backward: 1.5\n");
  EXPECT_ERROR_AT(e, 7, 17, "cluster.efficiency.torch_misaligned_gemm.backward", "must be a fraction of peak in [0, 1]");
}

TEST(ScenarioErrors, HeadsMustDivideHiddenAndKvHeadsMustDivideHeads) {
  auto e = error_of(kBase, {"model.heads=48"});
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("heads (48) must divide hidden (4096)"), std::string::npos) << e->what();
  auto e2 = error_of(kBase, {"model.kv_heads=5"});
  ASSERT_TRUE(e2);
  EXPECT_NE(std::string(e2->what()).find("kv_heads (5) must divide heads (32)"), std::string::npos) << e2->what();
}

TEST(ScenarioErrors, UnknownPresetSuggestsAKnownOne) {
  auto e = error_of("model: {preset: llama2-7B}\ncluster: {gpu: a100-80gb}\n");
  EXPECT_ERROR_AT(e, 1, 17, "model.preset", "did you mean 'llama2-7b'?");
  auto e2 = error_of("model: {preset: llama2-7b}\ncluster: {gpu: h100}\n");
  EXPECT_ERROR_AT(e2, 2, 16, "cluster.gpu.preset", "unknown GPU preset 'h100'");
}

// DeepSpeed's own check (zero/config.py offload_ratio_check asserts stage 3), so zsim refuses it too.
TEST(ScenarioErrors, PartialOptimizerOffloadNeedsStage3AsDeepSpeedAsserts) {
  auto e = error_of(kBase + "    offload_optimizer: {device: cpu, ratio: 0.5}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.zero_optimization.offload_optimizer.ratio");
  EXPECT_NE(std::string(e->what()).find("needs ZeRO stage 3"), std::string::npos) << e->what();
}

TEST(ScenarioErrors, AttentionIsFlashOrEager) {
  expect_override_error("model.attention", "sdpa", "expected flash or eager");
}

TEST(ScenarioErrors, DropoutIsAProbabilityBelowOne) {
  for (const char* set : {"model.attention_dropout=1", "model.hidden_dropout=-0.1"}) {
    auto e = error_of(kBase, {set});
    ASSERT_TRUE(e) << set;
    EXPECT_NE(std::string(e->what()).find("dropout probability is in [0, 1)"), std::string::npos) << e->what();
  }
}

TEST(ScenarioErrors, ParameterOffloadNeedsStage3) {
  auto e = error_of(kBase + "    offload_param: {device: cpu}\n");
  EXPECT_ERROR_AT(e, 15, 29, "deepspeed.zero_optimization.offload_param.device", "needs ZeRO stage 3");
}

TEST(ScenarioErrors, NvmeOffloadNeedsAnNvmeDevice) {
  auto e = error_of(kBase + "    offload_optimizer: {device: nvme}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "cluster.nvme");
}

TEST(ScenarioErrors, MissingGpuSaysHowToGiveOne) {
  auto e = error_of("model: {preset: llama2-7b}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "cluster.gpu");
  EXPECT_NE(std::string(e->what()).find("h100-80gb"), std::string::npos) << e->what();
}

TEST(ScenarioErrors, MultiNodeNeedsAnInterNodeBandwidth) {
  auto e = error_of("model: {preset: llama2-7b}\ncluster: {gpu: a100-80gb, nodes: 2}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "cluster.links.ib_GBps");
}

TEST(ScenarioErrors, EmptyAndNonMapDocuments) {
  EXPECT_TRUE(error_of(""));
  EXPECT_TRUE(error_of("- a\n- b\n"));
  EXPECT_TRUE(error_of("just a string"));
}

TEST(ScenarioErrors, DeepNestingIsRejectedBeforeParsing) {
  auto e = error_of(std::string(10000, '[') + std::string(10000, ']'));
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("nesting"), std::string::npos);
}

TEST(ScenarioErrors, ErrorMessageFormatIsFileLineColumnKey) {
  auto e = error_of(kBase + "    reduce_bucket_size: 0\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(std::string(e->what()).rfind(kTestFile + ":15:25: key 'deepspeed.zero_optimization.reduce_bucket_size': ", 0), 0u)
      << e->what();
}

TEST(ScenarioErrors, ValidateWithoutLocationsNamesTheKeyForScenariosBuiltInCode) {
  Scenario s = testing::parse(kBase);
  s.source_file = "";
  s.zero.stage = 4;
  try {
    validate_scenario(s);
    ADD_FAILURE() << "stage 4 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where().key_path, "deepspeed.zero_optimization.stage");
    EXPECT_EQ(e.where().line, 0);
  }
}

}  // namespace zsim
