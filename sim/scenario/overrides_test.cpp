// --set dotted.key=value what-if overrides.
#include <gtest/gtest.h>

#include "sim/scenario/scenario_test_util.hpp"

namespace zsim {
using testing::error_of;
using testing::kBase;
using testing::parse;

TEST(Overrides, ReplaceAnExistingValue) {
  EXPECT_EQ(parse(kBase, {"deepspeed.zero_optimization.stage=3"}).zero.stage, 3);
}

TEST(Overrides, CreateMissingBlocks) {
  Scenario s = parse("model: {preset: llama2-7b}\ncluster: {gpu: a100-80gb, host: {memory_bytes: 1TB}, links: "
                     "{pcie_GBps: 25}}\n",
                     {"deepspeed.zero_optimization.stage=2", "deepspeed.zero_optimization.offload_optimizer.device=cpu"});
  EXPECT_EQ(s.zero.stage, 2);
  EXPECT_EQ(s.zero.offload_optimizer.device, OffloadDevice::cpu);
}

TEST(Overrides, ApplyInOrderLastWins) {
  EXPECT_EQ(parse(kBase, {"training.seq_len=1024", "training.seq_len=8192"}).training.seq_len, 8192);
}

TEST(Overrides, AFieldOfAScalarGpuPresetKeepsThePreset) {
  Scenario s = parse(kBase, {"cluster.gpu.peak_tflops=100"});
  EXPECT_EQ(s.cluster.gpu.name, "a100-80gb");
  EXPECT_DOUBLE_EQ(s.cluster.gpu.peak_tflops, 100);
}

TEST(Overrides, ABlockValueIsParsedAsYaml) {
  Scenario s = parse(kBase, {"deepspeed.zero_optimization={stage: 1, overlap_comm: true}"});
  EXPECT_EQ(s.zero.stage, 1);
  EXPECT_TRUE(s.zero.overlap_comm);
}

TEST(Overrides, UnknownKeyIsAnErrorNamingItWithASuggestion) {
  auto e = error_of(kBase, {"deepspeed.zero_optimization.stag=3"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().file, "--set");
  EXPECT_EQ(e->where().key_path, "deepspeed.zero_optimization.stag");
  EXPECT_NE(std::string(e->what()).find("did you mean 'stage'?"), std::string::npos) << e->what();
}

TEST(Overrides, MissingEqualsSignIsAnError) {
  auto e = error_of(kBase, {"deepspeed.zero_optimization.stage"});
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("KEY=VALUE"), std::string::npos) << e->what();
}

TEST(Overrides, BadValueIsReportedAsComingFromSet) {
  auto e = error_of(kBase, {"training.micro_batch=lots"});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->where().file, "--set");
  EXPECT_EQ(e->where().key_path, "training.micro_batch");
  EXPECT_NE(std::string(e->what()).find("expected an integer"), std::string::npos) << e->what();
}

TEST(Overrides, KeysBelowUnmodelledBlocksAreAllowedAndWarn) {
  Scenario s = parse(kBase, {"deepspeed.optimizer.params.lr=0.001"});
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("deepspeed.optimizer"), std::string::npos);
}

}  // namespace zsim
