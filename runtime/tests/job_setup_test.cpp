// From arguments to the job, without a GPU: the cluster must be what was launched, --here and
// --gpus-per-node reshape it, and a scenario zsim says does not fit is refused unless --force.
#include "runtime/cli/job_setup.hpp"

#include <functional>

#include <gtest/gtest.h>

#include "sim/common/error.hpp"

namespace zrun {
namespace {

constexpr const char* kTiny = "runtime/scenarios/tiny-zero3-1xh100.yaml";  // 1 node x 1 GPU

ZrunArgs args_for(const char* scenario) {
  ZrunArgs a;
  a.scenario = scenario;
  a.steps = 1;
  a.warmup = 0;
  return a;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const zsim::InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(JobSetup, AClusterOfTheLaunchedSizeIsAccepted) {
  const zsim::Scenario s = load_job_scenario(args_for(kTiny), {1, 1, "--nproc-per-node 1"}, std::nullopt);
  EXPECT_EQ(s.world_size(), 1);
}

TEST(JobSetup, AClusterOfAnotherSizeIsRefusedSayingBothSizes) {
  const std::string m =
      error_of([] { load_job_scenario(args_for(kTiny), {2, 2, "--nproc-per-node 2"}, std::nullopt); });
  EXPECT_NE(m.find("1 node(s) x 1 GPUs per node = 1 ranks, but 2 rank(s) were launched (--nproc-per-node 2)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(kTiny), std::string::npos) << m;
}

// zrun's model has no dropout, so it refuses to stand in for a model with dropout.
TEST(JobSetup, DropoutIsRefusedUntilZrunsModelHasIt) {
  ZrunArgs a = args_for(kTiny);
  a.overrides = {"model.hidden_dropout=0.1"};
  std::string m = error_of([&] { load_job_scenario(a, {1, 1, "test"}, std::nullopt); });
  EXPECT_NE(m.find("applies no dropout"), std::string::npos) << m;
  a.overrides = {"model.attention_dropout=0.1"};
  m = error_of([&] { load_job_scenario(a, {1, 1, "test"}, std::nullopt); });
  EXPECT_NE(m.find("model.attention_dropout"), std::string::npos) << m;
}

// Flash attention runs where zrun's kernels do (the tiny model: bf16, head dim 64), and is refused naming the
// key where they do not.
TEST(JobSetup, FlashAttentionRunsAtHeadDim64Or128InBf16OrFp16) {
  ZrunArgs a = args_for(kTiny);
  a.overrides = {"model.attention=flash"};
  EXPECT_EQ(load_job_scenario(a, {1, 1, "test"}, std::nullopt).model.attention, zsim::Attention::flash);
  a.overrides = {"model.attention=flash", "model.heads=8", "model.kv_heads=2"};  // head dim 32
  std::string m = error_of([&] { load_job_scenario(a, {1, 1, "test"}, std::nullopt); });
  EXPECT_NE(m.find("model.attention"), std::string::npos) << m;
  EXPECT_NE(m.find("head dim 32"), std::string::npos) << m;
  a.overrides = {"model.attention=flash", "training.precision=fp32"};
  m = error_of([&] { load_job_scenario(a, {1, 1, "test"}, std::nullopt); });
  EXPECT_NE(m.find("fp32"), std::string::npos) << m;
}

TEST(JobSetup, HereMakesOneNodeOfTheLaunchedGpusWithThisMachinesMemory) {
  ZrunArgs a = args_for(kTiny);
  a.here = true;
  const zsim::Scenario s = load_job_scenario(a, {4, 4, "--nproc-per-node 4"}, LocalGpu{"H200", 140LL << 30});
  EXPECT_EQ(s.cluster.nodes, 1);
  EXPECT_EQ(s.cluster.gpus_per_node, 4);
  EXPECT_EQ(s.cluster.gpu.hbm_bytes, 140LL << 30);
}

TEST(JobSetup, GpusPerNodeSplitsTheLaunchedWorldIntoVirtualNodes) {
  ZrunArgs a = args_for(kTiny);
  a.gpus_per_node = 1;
  const zsim::Scenario s = load_job_scenario(a, {2, 2, "--nproc-per-node 2"}, std::nullopt);
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.cluster.gpus_per_node, 1);
}

TEST(JobSetup, GpusPerNodeThatDoNotDivideTheWorldAreRefused) {
  ZrunArgs a = args_for(kTiny);
  a.gpus_per_node = 2;
  const std::string m = error_of([&] { load_job_scenario(a, {3, 3, "--nproc-per-node 3"}, std::nullopt); });
  EXPECT_NE(m.find("2 GPUs per node do not divide the 3 ranks launched"), std::string::npos) << m;
}

TEST(JobSetup, AScenarioThatDoesNotFitIsRefusedNamingPeakAndCapacity) {
  ZrunArgs a = args_for(kTiny);
  a.overrides = {"cluster.gpu.hbm_bytes=1MiB"};
  const zsim::Scenario s = load_job_scenario(a, {1, 1, "test"}, std::nullopt);
  const std::string m = error_of([&] { plan_job(a, s); });
  EXPECT_NE(m.find("zsim predicts this does not fit: gpu peak"), std::string::npos) << m;
  EXPECT_NE(m.find("> capacity 1.00 MiB"), std::string::npos) << m;
  EXPECT_NE(m.find("--force"), std::string::npos) << m;
}

TEST(JobSetup, ForceRunsAScenarioThatDoesNotFit) {
  ZrunArgs a = args_for(kTiny);
  a.overrides = {"cluster.gpu.hbm_bytes=1MiB"};
  a.force = true;
  const Job job = plan_job(a, load_job_scenario(a, {1, 1, "test"}, std::nullopt));
  EXPECT_FALSE(job.fits);
  EXPECT_FALSE(job.schedule.ops.empty());
}

TEST(JobSetup, TheScheduleHasTheWarmupAndMeasuredSteps) {
  ZrunArgs a = args_for(kTiny);
  a.warmup = 1;
  a.steps = 2;
  const Job job = plan_job(a, load_job_scenario(a, {1, 1, "test"}, std::nullopt));
  EXPECT_TRUE(job.fits);
  EXPECT_EQ(job.schedule.meta.steps, 3);
}

}  // namespace
}  // namespace zrun
