// DeepSpeed's defaults, "auto" as the Hugging Face integration resolves it, and warnings for keys DeepSpeed
// accepts that zsim does not model.
#include <gtest/gtest.h>

#include "sim/scenario/scenario_test_util.hpp"

namespace zsim {
using testing::error_of;
using testing::kBase;
using testing::parse;

TEST(DeepSpeedSemantics, DefaultsAreDeepSpeeds) {
  const ZeroConfig z = parse(kBase).zero;  // only stage: 2 given
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_EQ(z.reduce_bucket_size, 500'000'000);
  EXPECT_EQ(z.allgather_bucket_size, 500'000'000);
  EXPECT_EQ(z.stage3_prefetch_bucket_size, 50'000'000);
  EXPECT_EQ(z.stage3_max_live_parameters, 1'000'000'000);
  EXPECT_EQ(z.stage3_max_reuse_distance, 1'000'000'000);
  EXPECT_EQ(z.stage3_param_persistence_threshold, 100'000);
  EXPECT_EQ(z.sub_group_size, 1'000'000'000);
  EXPECT_EQ(z.offload_optimizer.device, OffloadDevice::none);
  EXPECT_EQ(z.offload_optimizer.buffer_count, 4);
  EXPECT_DOUBLE_EQ(z.offload_optimizer.ratio, 1.0);
  EXPECT_EQ(z.offload_param.buffer_count, 5);
  EXPECT_EQ(z.offload_param.buffer_size, 100'000'000);
  EXPECT_EQ(z.offload_param.max_in_cpu, 1'000'000'000);
  EXPECT_EQ(z.zero_hpz_partition_size, 1);
  EXPECT_FALSE(z.zero_quantized_weights);
  EXPECT_FALSE(z.zero_quantized_gradients);
  EXPECT_FALSE(z.zeropp_loco_param.enabled);
  EXPECT_FALSE(z.stage3_allgather_sequential);
  EXPECT_TRUE(z.use_multi_rank_bucket_allreduce);  // zero/config.py: default True
  EXPECT_FALSE(z.round_robin_gradients);
}

// DeepSpeed's zero/config.py accepts ZeRO++ and the stage-3 fetch options at every stage (its validators
// check only overlap_comm and the offload ratio); engine._configure_zero_optimizer gives them to
// DeepSpeedZeroOptimizer_Stage3 only, so stages 1-2 run without them. zsim warns and drops them.
TEST(DeepSpeedSemantics, StageThreeOnlyKeysBelowStageThreeWarnAndAreIgnored) {
  const std::vector<std::string> keys = {"zero_quantized_weights=true", "zero_quantized_gradients=true",
                                         "zero_hpz_partition_size=8", "stage3_allgather_sequential=true",
                                         "stage3_use_all_reduce_for_fetch_params=true"};
  for (int stage : {1, 2}) {
    std::vector<std::string> set = {"deepspeed.zero_optimization.stage=" + std::to_string(stage)};
    for (const auto& k : keys) set.push_back("deepspeed.zero_optimization." + k);
    const Scenario s = parse(kBase, set);
    EXPECT_EQ(s.zero.zero_hpz_partition_size, 1);
    EXPECT_FALSE(s.zero.zero_quantized_weights);
    EXPECT_FALSE(s.zero.zero_quantized_gradients);
    EXPECT_FALSE(s.zero.stage3_allgather_sequential);
    EXPECT_FALSE(s.zero.stage3_use_all_reduce_for_fetch_params);
    ASSERT_EQ(s.warnings.size(), keys.size()) << "stage " << stage;
    for (const auto& w : s.warnings) EXPECT_NE(w.find("DeepSpeed accepts it at stage " + std::to_string(stage) +
                                                      " and ignores it"), std::string::npos) << w;
  }
}

TEST(DeepSpeedSemantics, LocoBelowStageThreeIsIgnoredWithItsQuantizedGradients) {
  const Scenario s = parse(kBase + "    zero_quantized_gradients: true\n    zeropp_loco_param: {err_beta: 0.8}\n");
  EXPECT_FALSE(s.zero.zeropp_loco_param.enabled);
  EXPECT_FALSE(s.zero.zero_quantized_gradients);
  EXPECT_EQ(s.warnings.size(), 2u);
}

TEST(DeepSpeedSemantics, StageThreeKeepsItsZeroPlusPlusKeysWithoutWarnings) {
  const Scenario s = parse(kBase, {"deepspeed.zero_optimization.stage=3", "deepspeed.zero_optimization.zero_quantized_weights=true",
                                   "deepspeed.zero_optimization.zero_hpz_partition_size=8"});
  EXPECT_TRUE(s.zero.zero_quantized_weights);
  EXPECT_EQ(s.zero.zero_hpz_partition_size, 8);
  EXPECT_TRUE(s.warnings.empty());
}

TEST(DeepSpeedSemantics, MultiRankBucketAllreduceAndRoundRobinGradientsAreRead) {
  const ZeroConfig z = parse(kBase + "    use_multi_rank_bucket_allreduce: false\n    round_robin_gradients: true\n").zero;
  EXPECT_FALSE(z.use_multi_rank_bucket_allreduce);
  EXPECT_TRUE(z.round_robin_gradients);
}

// MiCS is a partitioning scheme of its own: a shard size other than DeepSpeed's -1 (off) is refused,
// naming the key, MiCS and where it was written.
TEST(DeepSpeedSemantics, MicsIsRefusedNamingTheKeyAndMics) {
  auto e = error_of(kBase + "    mics_shard_size: 8\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.zero_optimization.mics_shard_size");
  EXPECT_EQ(e->where().line, 15);
  EXPECT_NE(std::string(e->what()).find("MiCS"), std::string::npos) << e->what();
  EXPECT_NE(std::string(e->what()).find("docs/scenario.md"), std::string::npos) << e->what();
}

// communication_data_type (runtime/config.py get_communication_data_type): null keeps the training dtype;
// fp32 / fp16 / bf16 in any case set the reductions' dtype; anything else is an error naming the key.
TEST(DeepSpeedSemantics, CommunicationDataTypeIsReadAsDeepSpeedReadsIt) {
  EXPECT_FALSE(parse(kBase).training.communication_data_type);
  EXPECT_FALSE(parse(kBase + "  communication_data_type: null\n").training.communication_data_type);
  EXPECT_EQ(parse(kBase + "  communication_data_type: FP32\n").training.communication_data_type, Precision::fp32);
  EXPECT_EQ(parse(kBase + "  communication_data_type: fp16\n").training.communication_data_type, Precision::fp16);
  EXPECT_TRUE(error_of(kBase + "  communication_data_type: int8\n"));
}

// A refused key at its default (or null, or a block with enabled: false) changes nothing: a warning only.
TEST(DeepSpeedSemantics, RefusedKeysAtTheirDefaultAreAcceptedWithAWarning) {
  Scenario s = parse(kBase + "    mics_shard_size: -1\n    cpu_offload: false\n  torch_autocast: null\n"
                             "  amp: {enabled: false}\n");
  EXPECT_EQ(s.warnings.size(), 4u);
  EXPECT_TRUE(error_of(kBase + "    cpu_offload: true\n"));
  EXPECT_TRUE(error_of(kBase + "  torch_autocast: {enabled: true}\n"));
  EXPECT_TRUE(error_of(kBase + "  data_types: {grad_accum_dtype: fp32}\n"));
}

TEST(DeepSpeedSemantics, OverlapCommDefaultsToTrueForStage3Only) {
  EXPECT_FALSE(parse(kBase).zero.overlap_comm);
  EXPECT_TRUE(parse(kBase, {"deepspeed.zero_optimization.stage=3"}).zero.overlap_comm);
  EXPECT_FALSE(parse(kBase, {"deepspeed.zero_optimization.stage=3", "deepspeed.zero_optimization.overlap_comm=false"})
                   .zero.overlap_comm);
  EXPECT_TRUE(parse(kBase, {"deepspeed.zero_optimization.overlap_comm=true"}).zero.overlap_comm);
}

TEST(DeepSpeedSemantics, BucketSizesAreElementsAndAcceptScientificNotation) {
  Scenario s = parse(kBase + "    reduce_bucket_size: 2e8\n    allgather_bucket_size: 5e7\n");
  EXPECT_EQ(s.zero.reduce_bucket_size, 200'000'000);
  EXPECT_EQ(s.zero.allgather_bucket_size, 50'000'000);
}

TEST(DeepSpeedSemantics, AutoResolvesFromHiddenSizeLikeTheHfIntegration) {
  Scenario s = parse(kBase + "    reduce_bucket_size: auto\n    stage3_prefetch_bucket_size: auto\n"
                             "    stage3_param_persistence_threshold: auto\n",
                     {"deepspeed.zero_optimization.stage=3"});
  const std::int64_t h = 4096;  // llama2-7b hidden
  EXPECT_EQ(s.zero.reduce_bucket_size, h * h);
  EXPECT_EQ(s.zero.stage3_prefetch_bucket_size, static_cast<std::int64_t>(0.9 * h * h));
  EXPECT_EQ(s.zero.stage3_param_persistence_threshold, 10 * h);
}

TEST(DeepSpeedSemantics, AutoBatchSizesComeFromTraining) {
  Scenario s = parse(kBase + "  train_micro_batch_size_per_gpu: auto\n  gradient_accumulation_steps: auto\n"
                             "  train_batch_size: auto\n  bf16: {enabled: auto}\n",
                     {"training.micro_batch=2", "training.grad_accum=3"});
  EXPECT_EQ(s.training.micro_batch, 2);
  EXPECT_EQ(s.training.grad_accum, 3);
  EXPECT_EQ(s.training.precision, Precision::bf16);
}

TEST(DeepSpeedSemantics, AutoIsAnErrorWhereDeepSpeedCannotResolveIt) {
  auto e = error_of(kBase + "    allgather_bucket_size: auto\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.zero_optimization.allgather_bucket_size");
  EXPECT_EQ(e->where().line, 15);
}

TEST(DeepSpeedSemantics, TrainBatchSizeDerivesTheMissingFactor) {
  // 8 GPUs: train_batch_size = micro x grad_accum x 8.
  const std::string no_micro = "model: {preset: llama2-7b}\ncluster: {gpu: a100-80gb, gpus_per_node: 8, links: "
                               "{nvlink_GBps: 300}}\ndeepspeed:\n";
  Scenario a = parse(no_micro + "  train_batch_size: 64\n  train_micro_batch_size_per_gpu: 2\n");
  EXPECT_EQ(a.training.grad_accum, 4);
  Scenario b = parse(no_micro + "  train_batch_size: 64\n  gradient_accumulation_steps: 2\n");
  EXPECT_EQ(b.training.micro_batch, 4);
  Scenario c = parse(no_micro + "  train_batch_size: 64\n");
  EXPECT_EQ(c.training.micro_batch, 8);
  EXPECT_EQ(c.training.grad_accum, 1);
}

TEST(DeepSpeedSemantics, InconsistentTrainBatchSizeIsAnError) {
  auto e = error_of(kBase + "  train_batch_size: 100\n");  // micro 1 x 1 x 8 GPUs != 100
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.train_batch_size");
  EXPECT_NE(std::string(e->what()).find("x 8 GPUs"), std::string::npos) << e->what();
}

TEST(DeepSpeedSemantics, DeepSpeedAndTrainingValuesMustAgree) {
  auto e = error_of(kBase + "  train_micro_batch_size_per_gpu: 4\n");  // training.micro_batch: 1
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.train_micro_batch_size_per_gpu");
  auto e2 = error_of(kBase + "  fp16: {enabled: true}\n");  // training.precision defaults... not given: ok
  EXPECT_FALSE(e2) << e2->what();
  auto e3 = error_of(kBase + "  fp16: {enabled: true}\n", {"training.precision=bf16"});
  ASSERT_TRUE(e3);
  EXPECT_EQ(e3->where().key_path, "deepspeed.fp16.enabled");
}

TEST(DeepSpeedSemantics, PrecisionFollowsDeepSpeedBlocksWhenTrainingDoesNotSayIt) {
  EXPECT_EQ(parse(kBase + "  fp16: {enabled: true}\n").training.precision, Precision::fp16);
  EXPECT_EQ(parse(kBase + "  bf16: {enabled: false}\n").training.precision, Precision::fp32);
}

TEST(DeepSpeedSemantics, Bf16AndFp16BothEnabledIsAnError) {
  auto e = error_of(kBase + "  bf16: {enabled: true}\n  fp16: {enabled: true}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.fp16.enabled");
  EXPECT_EQ(e->where().line, 16);
}

TEST(DeepSpeedSemantics, Fp32TrainingNeedsTheGpusFp32Peak) {
  auto e = error_of(kBase, {"training.precision=fp32", "cluster.gpu.peak_fp32_tflops=0"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "cluster.gpu.peak_fp32_tflops");
  EXPECT_EQ(parse(kBase, {"training.precision=fp32"}).training.precision, Precision::fp32);
}

TEST(DeepSpeedSemantics, UnmodelledKeysWarnNamingTheKey) {
  Scenario s = parse(kBase + "    elastic_checkpoint: true\n    memory_efficient_linear: false\n"
                             "  gradient_clipping: 1.0\n  optimizer: {type: AdamW, params: {lr: 1e-4}}\n"
                             "  wall_clock_breakdown: false\n  zero_allow_untested_optimizer: true\n");
  ASSERT_EQ(s.warnings.size(), 6u);
  EXPECT_NE(s.warnings[0].find("'deepspeed.zero_optimization.elastic_checkpoint'"), std::string::npos)
      << s.warnings[0];
  EXPECT_NE(s.warnings[0].find("inline.yaml:15:5"), std::string::npos) << s.warnings[0];
  EXPECT_NE(s.warnings[3].find("'deepspeed.optimizer'"), std::string::npos) << s.warnings[3];
}

TEST(DeepSpeedSemantics, DeepSpeedFieldAliasesAreAccepted) {
  Scenario s = parse(kBase + "    prefetch_bucket_size: 1000\n    max_live_parameters: 2000\n",
                     {"deepspeed.zero_optimization.stage=3"});
  EXPECT_EQ(s.zero.stage3_prefetch_bucket_size, 1000);
  EXPECT_EQ(s.zero.stage3_max_live_parameters, 2000);
}

TEST(DeepSpeedSemantics, AKeyAndItsAliasTogetherIsAnError) {
  auto e = error_of(kBase + "    stage3_prefetch_bucket_size: 1000\n    prefetch_bucket_size: 2000\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().line, 16);
  EXPECT_NE(std::string(e->what()).find("same DeepSpeed key"), std::string::npos) << e->what();
}

TEST(DeepSpeedSemantics, ZeroPlusPlusAndLocoAndOffloadBlocks) {
  Scenario s = parse(kBase + R"(    zero_hpz_partition_size: 8
    zero_quantized_weights: true
    zero_quantized_gradients: true
    zeropp_loco_param: {err_beta: 0.5, reset_T: 512}
    stage3_allgather_sequential: true
    use_all_reduce_for_fetch_params: true
    offload_optimizer: {device: cpu, pin_memory: true, ratio: 0.3}
    offload_param: {device: cpu, buffer_count: 6, buffer_size: 1e8, max_in_cpu: 2e9}
)",
                     {"deepspeed.zero_optimization.stage=3"});
  const ZeroConfig& z = s.zero;
  EXPECT_EQ(z.zero_hpz_partition_size, 8);
  EXPECT_TRUE(z.zero_quantized_weights);
  EXPECT_TRUE(z.zero_quantized_gradients);
  EXPECT_TRUE(z.zeropp_loco_param.enabled);
  EXPECT_DOUBLE_EQ(z.zeropp_loco_param.err_beta, 0.5);
  EXPECT_EQ(z.zeropp_loco_param.reset_T, 512);
  EXPECT_TRUE(z.stage3_allgather_sequential);
  EXPECT_TRUE(z.stage3_use_all_reduce_for_fetch_params);  // DeepSpeed's field name for the stage3_ key
  EXPECT_EQ(z.offload_optimizer.device, OffloadDevice::cpu);
  EXPECT_TRUE(z.offload_optimizer.pin_memory);
  EXPECT_DOUBLE_EQ(z.offload_optimizer.ratio, 0.3);
  EXPECT_EQ(z.offload_param.device, OffloadDevice::cpu);
  EXPECT_EQ(z.offload_param.buffer_count, 6);
  EXPECT_EQ(z.offload_param.max_in_cpu, 2'000'000'000);
}

TEST(DeepSpeedSemantics, LocoDefaultsWhenTheBlockIsEmpty) {
  Scenario s = parse(kBase + "    zero_quantized_gradients: true\n    zeropp_loco_param: {}\n",
                     {"deepspeed.zero_optimization.stage=3"});
  EXPECT_TRUE(s.zero.zeropp_loco_param.enabled);
  EXPECT_DOUBLE_EQ(s.zero.zeropp_loco_param.err_beta, 0.8);
  EXPECT_EQ(s.zero.zeropp_loco_param.reset_T, 1024);
}

TEST(DeepSpeedSemantics, PartialOptimizerOffloadNeedsStage3) {
  auto e = error_of(kBase + "    offload_optimizer: {device: cpu, ratio: 0.5}\n");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().key_path, "deepspeed.zero_optimization.offload_optimizer.ratio");
}

}  // namespace zsim
