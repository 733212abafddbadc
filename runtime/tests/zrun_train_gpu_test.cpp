// zrun training for real on this machine's GPUs (skips with a message where there is none, as in CI): the tiny
// scenario on every visible GPU (--here). The loss falls, grad accumulation sees the same samples as a bigger
// micro-batch, recomputation changes nothing, and an injected fault ends the job naming the rank and the op.
// ZeRO stages 1-2 (every reduction path of stage_1_and_2.py) and stage 3 (every fetch path, prefetch and
// checkpointing on and off) give the losses of stage 0; so do fp32 training and fp32 communication_data_type.
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "runtime/tests/zrun_gpu_run.hpp"

namespace {
namespace fs = std::filesystem;

using zrun::test::have_gpu;
using zrun::test::ZrunRun;

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: zrun's training tests run on the GPU machine"

ZrunRun zrun(const std::string& env, const std::string& args, int stage = 0) {
  return zrun::test::run_zrun(env, "runtime/scenarios/tiny-zero3-1xh100.yaml", stage, args);
}

std::vector<double> losses(const std::string& out) {
  std::vector<double> v;
  const std::regex line(R"(step +\d+ +loss ([0-9.]+))");
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it) v.push_back(std::stod((*it)[1]));
  return v;
}

TEST(ZrunTrainGpu, TheTinyModelsLossFallsByHalfWithin50Steps) {
  REQUIRE_GPU();
  const ZrunRun r = zrun("ZRUN_LR=3e-3", "--set training.micro_batch=8 --steps 50 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<double> l = losses(r.out);
  ASSERT_EQ(l.size(), 50u) << r.out;
  EXPECT_LE(l.back(), 0.5 * l.front()) << r.out;
}

int visible_gpus() { return zrun::test::test_gpus(); }

// The issue's tolerance: 1e-3 without reductions in 16 bits (one GPU: none at all), 1e-2 with bf16 reductions.
TEST(ZrunTrainGpu, TwoMicroStepsOfOneSequenceGiveTheLossesOfOneMicroBatchOfTwo) {
  REQUIRE_GPU();
  const double tolerance = visible_gpus() > 1 ? 1e-2 : 1e-3;
  const std::vector<double> a = losses(zrun("", "--set training.micro_batch=2 --steps 5 --warmup 0").out);
  const std::vector<double> b =
      losses(zrun("", "--set training.micro_batch=1 --set training.grad_accum=2 --steps 5 --warmup 0").out);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LE(std::fabs(a[i] - b[i]) / a[i], tolerance) << "step " << i << ": " << a[i] << " vs " << b[i];
}

// Issue 7: stages 1 and 2 give the loss of stage 0 at every step of a 30-step run (bf16 reductions: 1e-2;
// with one GPU nothing is reduced: 1e-3). With gradient accumulation stage 2 adds each micro-step's reduced
// bf16 gradients into its partition, as DeepSpeed does, where stage 0 rounds the accumulated gradient once: the
// rounding differs from the first step on and training amplifies it (2.5% by step 20 on one H100), so the
// accumulating runs are compared over their first 5 steps.
TEST(ZrunTrainGpu, StagesOneAndTwoGiveTheLossesOfStageZero) {
  REQUIRE_GPU();
  const double tolerance = visible_gpus() > 1 ? 1e-2 : 1e-3;
  for (const char* accum : {"--set training.grad_accum=1 --steps 30", "--set training.grad_accum=2 --steps 5"}) {
    const std::string common = std::string(accum) + " --warmup 0 --set training.micro_batch=1 ";
    const std::vector<double> zero = losses(zrun("", common).out);
    ASSERT_GE(zero.size(), 5u);
    for (const char* stage : {"1", "2"}) {
      const ZrunRun r = zrun("", common + "--set deepspeed.zero_optimization.stage=" + stage);
      const std::vector<double> l = losses(r.out);
      ASSERT_EQ(l.size(), zero.size()) << "stage " << stage << ": " << r.out;
      for (size_t i = 0; i < l.size(); ++i)
        EXPECT_LE(std::fabs(l[i] - zero[i]) / zero[i], tolerance)
            << accum << " stage " << stage << " step " << i << ": " << l[i] << " vs " << zero[i];
    }
  }
}

// Every other ZeRO-1/2 reduction path (docs/schedule-format.md): the same losses as stage 0 over 30 steps, with the
// tolerance above. A small reduce_bucket_size cuts the model into many buckets, so that buckets hold slices of several
// tensors (and, on several GPUs, of several owners).
void expect_zero12_path_gives_stage0_losses(const std::string& stage, const std::string& keys) {
  const double tolerance = visible_gpus() > 1 ? 1e-2 : 1e-3;
  const std::string common =
      "--set training.grad_accum=1 --steps 30 --warmup 0 --set training.micro_batch=1 "
      "--set deepspeed.zero_optimization.reduce_bucket_size=100000 ";
  const std::vector<double> zero = losses(zrun("", common).out);
  ASSERT_EQ(zero.size(), 30u);
  const ZrunRun r = zrun("", common + keys + " --set deepspeed.zero_optimization.stage=" + stage);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<double> l = losses(r.out);
  ASSERT_EQ(l.size(), zero.size()) << r.out;
  for (size_t i = 0; i < l.size(); ++i)
    EXPECT_LE(std::fabs(l[i] - zero[i]) / zero[i], tolerance)
        << keys << " stage " << stage << " step " << i << ": " << l[i] << " vs " << zero[i];
}

TEST(ZrunTrainGpu, PerOwnerReducesGiveTheLossesOfStageZero) {
  REQUIRE_GPU();
  for (const char* stage : {"1", "2"})
    expect_zero12_path_gives_stage0_losses(stage, "--set deepspeed.zero_optimization.use_multi_rank_bucket_allreduce=false");
}

TEST(ZrunTrainGpu, WithoutContiguousGradientsStagesOneAndTwoGiveTheLossesOfStageZero) {
  REQUIRE_GPU();
  for (const char* stage : {"1", "2"})
    expect_zero12_path_gives_stage0_losses(stage, "--set deepspeed.zero_optimization.contiguous_gradients=false");
}

TEST(ZrunTrainGpu, WithoutReduceScatterStagesOneAndTwoGiveTheLossesOfStageZero) {
  REQUIRE_GPU();
  for (const char* stage : {"1", "2"})
    expect_zero12_path_gives_stage0_losses(stage, "--set deepspeed.zero_optimization.reduce_scatter=false");
}

TEST(ZrunTrainGpu, StageOneWithOverlapCommGivesTheLossesOfStageZero) {
  REQUIRE_GPU();
  expect_zero12_path_gives_stage0_losses("1", "--set deepspeed.zero_optimization.overlap_comm=true");
  expect_zero12_path_gives_stage0_losses(
      "1", "--set deepspeed.zero_optimization.overlap_comm=true "
           "--set deepspeed.zero_optimization.use_multi_rank_bucket_allreduce=false");
}

TEST(ZrunTrainGpu, RoundRobinGradientsGiveTheLossesOfStageZero) {
  REQUIRE_GPU();
  for (const char* stage : {"1", "2"}) {
    expect_zero12_path_gives_stage0_losses(stage, "--set deepspeed.zero_optimization.round_robin_gradients=true");
    expect_zero12_path_gives_stage0_losses(stage, "--set deepspeed.zero_optimization.round_robin_gradients=true "
                                                  "--set deepspeed.zero_optimization.use_multi_rank_bucket_allreduce=false");
  }
}

// fp32 training (no 16-bit rounding anywhere, fp32 reductions): stages 1, 2 and 3 give stage 0's losses to 1e-4
// over 30 steps, and the loss halves within 50 steps.
TEST(ZrunTrainGpu, Fp32TrainingGivesTheSameLossesAtEveryStage) {
  REQUIRE_GPU();
  const std::string common = "--set training.precision=fp32 --set training.micro_batch=1 --steps 30 --warmup 0";
  const std::vector<double> zero = losses(zrun("", common, 0).out);
  ASSERT_EQ(zero.size(), 30u);
  for (int stage : {1, 2, 3}) {
    const ZrunRun r = zrun("", common, stage);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::vector<double> l = losses(r.out);
    ASSERT_EQ(l.size(), zero.size()) << r.out;
    for (size_t i = 0; i < l.size(); ++i)
      EXPECT_LE(std::fabs(l[i] - zero[i]) / zero[i], 1e-4) << "stage " << stage << " step " << i;
  }
}

TEST(ZrunTrainGpu, Fp32TrainingHalvesTheLossWithin50Steps) {
  REQUIRE_GPU();
  const ZrunRun r = zrun("ZRUN_LR=3e-3", "--set training.precision=fp32 --set training.micro_batch=8 --steps 50 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<double> l = losses(r.out);
  ASSERT_EQ(l.size(), 50u) << r.out;
  EXPECT_LE(l.back(), 0.5 * l.front()) << r.out;
}

// communication_data_type fp32 with bf16 training: every stage casts its reductions to fp32 and back, and gives the
// losses of stage 0 (which casts the same way) within the issue's 1e-3 for fp32 reductions.
TEST(ZrunTrainGpu, Fp32CommunicationGivesStageZerosLossesAtEveryStage) {
  REQUIRE_GPU();
  const std::string common =
      "--set deepspeed.communication_data_type=fp32 --set training.micro_batch=1 --steps 30 --warmup 0";
  const ZrunRun base = zrun("", common, 0);
  ASSERT_EQ(base.exit_code, 0) << base.out;
  const std::vector<double> zero = losses(base.out);
  ASSERT_EQ(zero.size(), 30u);
  for (int stage : {1, 2, 3}) {
    const ZrunRun r = zrun("", common, stage);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::vector<double> l = losses(r.out);
    ASSERT_EQ(l.size(), zero.size()) << r.out;
    for (size_t i = 0; i < l.size(); ++i)
      EXPECT_LE(std::fabs(l[i] - zero[i]) / zero[i], 1e-3) << "stage " << stage << " step " << i;
  }
}

TEST(ZrunTrainGpu, FullCheckpointingRecomputesTheLossesOfTheRunWithout) {
  REQUIRE_GPU();
  const std::vector<double> a = losses(zrun("", "--set training.activation_checkpointing=full --steps 5 --warmup 0").out);
  const std::vector<double> b = losses(zrun("", "--set training.activation_checkpointing=none --steps 5 --warmup 0").out);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a, b);
}

// Flash attention (runtime/model/flash_attention.cu, no s x s tensor) trains the tiny model (head dim 64) with
// the losses of eager attention (the scores materialised): the two round differently in bf16 (P is rounded
// once in a different place, dq sums in another order), so they agree within bf16 tolerance, 1e-2 relative
// over 5 steps, not bitwise.
TEST(ZrunTrainGpu, FlashAttentionGivesTheLossesOfEagerWithinBf16Tolerance) {
  REQUIRE_GPU();
  const std::string common = "--steps 5 --warmup 0 --set training.micro_batch=4 ";
  const ZrunRun e = zrun("", common + "--set model.attention=eager");
  const ZrunRun f = zrun("", common + "--set model.attention=flash");
  ASSERT_EQ(f.exit_code, 0) << f.out;
  const std::vector<double> a = losses(e.out), b = losses(f.out);
  ASSERT_EQ(a.size(), 5u) << e.out;
  ASSERT_EQ(b.size(), 5u) << f.out;
  for (size_t i = 0; i < a.size(); ++i) {
    std::printf("  step %zu: eager %.5f flash %.5f (rel %.1e)\n", i, a[i], b[i], std::fabs(a[i] - b[i]) / a[i]);
    EXPECT_LE(std::fabs(a[i] - b[i]) / a[i], 1e-2) << "step " << i << ": eager " << a[i] << " flash " << b[i];
  }
  EXPECT_NE(a, b) << "flash and eager gave bitwise equal losses: is flash attention running at all?";
}

TEST(ZrunTrainGpu, AnInjectedExitAtAnOpEndsTheJobNamingRankAndOp) {
  REQUIRE_GPU();
  const ZrunRun r = zrun("ZRUN_FAULT=rank=0,op=bwd.L1.mlp.down,kind=exit", "--steps 2 --warmup 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("rank 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bwd.L1.mlp.down"), std::string::npos) << r.out;
}

TEST(ZrunTrainGpu, AnInjectedHangIsEndedByTheWatchdogWithin30Seconds) {
  REQUIRE_GPU();
  const ZrunRun r = zrun("ZRUN_OP_TIMEOUT_S=5 ZRUN_FAULT=rank=0,op=fwd.L0.attn.q,kind=hang", "--steps 2 --warmup 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, 30.0);
  EXPECT_NE(r.out.find("fwd.L0.attn.q"), std::string::npos) << r.out;
}

// ---- ZeRO stage 3 against stage 0: 30 steps, the same samples, losses within 1e-3 relative ----------------

constexpr int kSteps = 30;

// Stage 0's losses for the given extra settings (run once per setting and step count).
const std::vector<double>& stage0_losses(const std::string& settings, int steps) {
  static std::map<std::string, std::vector<double>> cache;
  const std::string args = settings + " --steps " + std::to_string(steps) + " --warmup 0";
  auto it = cache.find(args);
  if (it == cache.end()) {
    const ZrunRun r = zrun("", args, 0);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    it = cache.emplace(args, losses(r.out)).first;
  }
  return it->second;
}

void expect_stage3_gives_stage0_losses(const std::string& settings, const std::string& stage3_only,
                                       int steps = kSteps) {
  const std::vector<double>& base = stage0_losses(settings, steps);
  ASSERT_EQ(base.size(), static_cast<size_t>(steps));
  const ZrunRun r = zrun("", settings + " " + stage3_only + " --steps " + std::to_string(steps) + " --warmup 0", 3);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<double> l = losses(r.out);
  ASSERT_EQ(l.size(), base.size()) << r.out;
  for (size_t i = 0; i < l.size(); ++i) EXPECT_LE(std::fabs(l[i] - base[i]) / base[i], 1e-3) << "step " << i;
}

const std::string kCkpt = "--set training.activation_checkpointing=full";
const std::string kNoCkpt = "--set training.activation_checkpointing=none";

TEST(ZrunTrainGpu, Stage3CoalescedFetchWithPrefetchGivesTheLossesOfStage0) {
  REQUIRE_GPU();
  expect_stage3_gives_stage0_losses(kCkpt, "");
}

TEST(ZrunTrainGpu, Stage3WithoutCheckpointingGivesTheLossesOfStage0) {
  REQUIRE_GPU();
  expect_stage3_gives_stage0_losses(kNoCkpt, "");
}

TEST(ZrunTrainGpu, Stage3WithoutPrefetchGivesTheLossesOfStage0) {
  REQUIRE_GPU();
  expect_stage3_gives_stage0_losses(kCkpt, "--set deepspeed.zero_optimization.stage3_prefetch_bucket_size=0");
  expect_stage3_gives_stage0_losses(kNoCkpt, "--set deepspeed.zero_optimization.stage3_prefetch_bucket_size=0");
}

TEST(ZrunTrainGpu, Stage3SequentialAllGatherGivesTheLossesOfStage0) {
  REQUIRE_GPU();
  expect_stage3_gives_stage0_losses(kCkpt, "--set deepspeed.zero_optimization.stage3_allgather_sequential=true");
  expect_stage3_gives_stage0_losses(kNoCkpt, "--set deepspeed.zero_optimization.stage3_allgather_sequential=true");
}

TEST(ZrunTrainGpu, Stage3AllReduceFetchGivesTheLossesOfStage0) {
  REQUIRE_GPU();
  expect_stage3_gives_stage0_losses(kCkpt,
                                    "--set deepspeed.zero_optimization.stage3_use_all_reduce_for_fetch_params=true");
  expect_stage3_gives_stage0_losses(kNoCkpt,
                                    "--set deepspeed.zero_optimization.stage3_use_all_reduce_for_fetch_params=true");
}

// Over micro-steps stage 0 adds each gradient into its bf16 buffer in the backward itself (one rounding), stage 3
// rounds it into the bucket and adds the reduced bf16 chunk into grads.partition (DeepSpeed's order, two roundings):
// the runs part by ~1e-4 after a few steps and, the tiny model being chaotic at this learning rate, by ~1e-2 after
// twenty. The first steps check that every micro-step's gradient is in the partition once.
TEST(ZrunTrainGpu, Stage3AccumulatesGradientPartitionsOverMicroStepsAsStage0Does) {
  REQUIRE_GPU();
  expect_stage3_gives_stage0_losses(kCkpt + " --set training.grad_accum=2 --set training.micro_batch=1", "", 5);
}

}  // namespace
