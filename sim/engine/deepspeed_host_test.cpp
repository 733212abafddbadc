// The host's time per op under runtime deepspeed (efficiency.deepspeed_host): where each figure lands, and that the
// engine runs a step as long as the host or the GPU, whichever binds.
#include "sim/engine/deepspeed_host.hpp"

#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "sim/engine/host_issue.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/engine/time_schedule.hpp"
#include "sim/engine/timing_report.hpp"
#include "sim/engine/test_schedules.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"

namespace zsim {
namespace {

Scenario deepspeed_scenario(int stage, bool checkpointing = false, int layers = 2) {
  Scenario sc = test::scenario(test::small_llama(layers), stage, 1, 1);
  sc.runtime = RuntimeKind::deepspeed;
  sc.training.activation_checkpointing = checkpointing ? Checkpointing::full : Checkpointing::none;
  return sc;
}

EfficiencySpec::DeepSpeedHost figures() {
  EfficiencySpec::DeepSpeedHost h;
  h.llama_forward_layer_us = 1000, h.gpt2_forward_layer_us = 700, h.forward_fixed_us = 300;
  h.llama_backward_layer_us = 2000, h.gpt2_backward_layer_us = 1500, h.backward_fixed_us = 100;
  h.checkpoint_forward_layer_us = 400, h.recompute_layer_us = 2500;
  h.stage3_forward_module_us = 50, h.stage3_backward_module_us = 70;
  h.step_fixed_us = 900, h.step_param_us = 10, h.stage3_step_param_us = 20;
  return h;
}

// A scenario's schedule and each op's host time under the figures given (figures() by default).
struct Priced {
  Schedule s;
  std::vector<HostIssue> h;
};
Priced priced(const Scenario& sc, int steps = 1, const EfficiencySpec::DeepSpeedHost& with = figures()) {
  Priced p{make_schedule(sc, make_plan(sc), steps), {}};
  ClusterSpec c = sc.cluster;
  c.efficiency.deepspeed_host = with;
  p.h = host_issue(p.s, c);
  return p;
}

// Sum of the host's seconds over the compute ops of one kind and layer (layer -2: every layer).
double host_s(const Schedule& s, const std::vector<HostIssue>& h, ComputeKind what, int layer) {
  double t = 0;
  for (const Op& op : s.ops)
    if (op.kind == OpKind::compute && op.compute.what == what && (layer == -2 || op.layer == layer)) t += h[op.id].total_s;
  return t;
}

TEST(DeepSpeedHost, ADeepSpeedScheduleSaysItsFrameworkAndStage) {
  const Scenario sc = deepspeed_scenario(2);
  const Schedule s = make_schedule(sc, make_plan(sc), 1);
  EXPECT_EQ(s.meta.framework, "deepspeed");
  EXPECT_EQ(s.meta.zero_stage, 2);
  Scenario z = sc;
  z.runtime = RuntimeKind::zrun;
  EXPECT_EQ(make_schedule(z, make_plan(z), 1).meta.framework, "");
}

TEST(DeepSpeedHost, EachLayersForwardAndBackwardCarryTheirFiguresOnce) {
  const Scenario sc = deepspeed_scenario(2);
  const auto [s, h] = priced(sc);
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, 0), 1000e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, 1), 1000e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, -1), 300e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::backward, 1), 2000e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::backward, -1), 100e-6, 1e-12);
  // The step: fixed + 9 tensors per Llama layer + embedding, final norm and head.
  EXPECT_EQ(hf_parameter_tensors(s.model), 9 * 2 + 3);
  EXPECT_NEAR(host_s(s, h, ComputeKind::optimizer, -2), (900 + 21 * 10) * 1e-6, 1e-12);
}

// Each step's passes carry the figures: two steps, twice the host's time, none split across steps.
TEST(DeepSpeedHost, EveryStepCarriesItsOwnPasses) {
  const Scenario sc = deepspeed_scenario(2);
  const auto [s, h] = priced(sc, 2);
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, 0), 2 * 1000e-6, 1e-12);
  for (const Op& op : s.ops)
    if (op.kind == OpKind::compute && op.compute.what == ComputeKind::forward && op.layer == 0)
      EXPECT_NEAR(h[op.id].total_s * 9, 1000e-6, 1e-12) << op.name;  // 9 units in a Llama layer
}

TEST(DeepSpeedHost, StageThreeAddsEverySubmodulesHooksInForwardAndBackward) {
  const Scenario sc = deepspeed_scenario(3);
  const auto [s, h] = priced(sc);
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, 0), (1000 + 13 * 50) * 1e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, -1), (300 + 6 * 50) * 1e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::backward, 0), (2000 + 13 * 70) * 1e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::optimizer, -2), (900 + 21 * 20) * 1e-6, 1e-12);
}

EfficiencySpec::DeepSpeedHost with_reduction(double us_per_tensor) {
  EfficiencySpec::DeepSpeedHost h = figures();
  h.stage12_reduce_param_us = us_per_tensor;
  return h;
}

TEST(DeepSpeedHost, StagesOneAndTwoAddEachPassesParameterTensorsReductionToItsBackward) {
  for (int stage : {1, 2}) {
    const auto [s, h] = priced(deepspeed_scenario(stage), 1, with_reduction(60));
    EXPECT_NEAR(host_s(s, h, ComputeKind::backward, 0), (2000 + 9 * 60) * 1e-6, 1e-12) << stage;
    // The rest of the model: the embedding, the final norm and the head.
    EXPECT_NEAR(host_s(s, h, ComputeKind::backward, -1), (100 + 3 * 60) * 1e-6, 1e-12) << stage;
    EXPECT_NEAR(host_s(s, h, ComputeKind::forward, 0), 1000e-6, 1e-12) << stage;
  }
}

TEST(DeepSpeedHost, StagesZeroAndThreeRunNoStageOneTwoReduction) {
  for (int stage : {0, 3}) {
    const auto [s, h] = priced(deepspeed_scenario(stage), 1, with_reduction(60));
    const auto [s0, h0] = priced(deepspeed_scenario(stage), 1, with_reduction(0));
    EXPECT_NEAR(host_s(s, h, ComputeKind::backward, -2), host_s(s0, h0, ComputeKind::backward, -2), 1e-12) << stage;
  }
}

TEST(DeepSpeedHost, StageTwoReducesEveryMicroStepStageOneOnlyAfterTheBoundarysBackward) {
  for (int stage : {1, 2}) {
    Scenario sc = deepspeed_scenario(stage);
    sc.training.grad_accum = 3;
    const auto [s, h] = priced(sc, 1, with_reduction(60));
    const auto [s0, h0] = priced(sc, 1, with_reduction(0));
    const double added_s = host_s(s, h, ComputeKind::backward, -2) - host_s(s0, h0, ComputeKind::backward, -2);
    EXPECT_NEAR(added_s, (stage == 2 ? 3 : 1) * 21 * 60e-6, 1e-12) << stage;
  }
}

TEST(DeepSpeedHost, StageOnePricesItsReductionAtItsOwnFigureWhenGiven) {
  EfficiencySpec::DeepSpeedHost h1 = with_reduction(60);
  h1.stage1_reduce_param_us = 5;
  const auto [s1, p1] = priced(deepspeed_scenario(1), 1, h1);
  EXPECT_NEAR(host_s(s1, p1, ComputeKind::backward, 0), (2000 + 9 * 5) * 1e-6, 1e-12);
  // Stage 2's hooks keep stage12_reduce_param_us.
  const auto [s2, p2] = priced(deepspeed_scenario(2), 1, h1);
  EXPECT_NEAR(host_s(s2, p2, ComputeKind::backward, 0), (2000 + 9 * 60) * 1e-6, 1e-12);
}

TEST(DeepSpeedHost, StageOnesReductionIsStageTwosFigureWhenNotGiven) {
  const EfficiencySpec::DeepSpeedHost h = with_reduction(60);
  EXPECT_FALSE(h.stage1_reduce_param_us.has_value());
  EXPECT_EQ(h.effective_stage1_reduce_param_us(), 60);
}

// The per-tensor casts of stages 1-2 with the optimizer on the CPU (the schedule's `.to_fp32` copies in backward).
std::vector<OpId> offload_casts(const Schedule& s) {
  std::vector<OpId> out;
  for (const Op& op : s.ops)
    if (op.kind == OpKind::copy && op.phase == Phase::backward && op.name.ends_with(".to_fp32")) out.push_back(op.id);
  return out;
}

TEST(DeepSpeedHost, OffloadedStagesOneAndTwoWaitForTheGpuBeforeEachTensorsCastAfterItsPython) {
  for (int stage : {1, 2}) {
    Scenario sc = deepspeed_scenario(stage);
    sc.zero.offload_optimizer.device = OffloadDevice::cpu;
    EfficiencySpec::DeepSpeedHost h = figures();
    h.stage12_offload_param_us = 150;
    const auto [s, p] = priced(sc, 1, h);
    const std::vector<OpId> casts = offload_casts(s);
    ASSERT_EQ(casts.size(), static_cast<size_t>(hf_parameter_tensors(s.model))) << stage;
    for (OpId id : casts) {
      EXPECT_TRUE(p[id].waits_for_gpu) << stage;
      EXPECT_NEAR(p[id].total_s, 150e-6, 1e-12) << stage;
      EXPECT_NEAR(p[id].lead_s, 150e-6, 1e-12) << stage;
    }
  }
}

TEST(DeepSpeedHost, WithoutTheOffloadFigureTheCastsCostTheHostNothing) {
  Scenario sc = deepspeed_scenario(2);
  sc.zero.offload_optimizer.device = OffloadDevice::cpu;
  const auto [s, p] = priced(sc, 1, figures());
  const std::vector<OpId> casts = offload_casts(s);
  ASSERT_FALSE(casts.empty());
  for (OpId id : casts) EXPECT_FALSE(p[id].waits_for_gpu);
}

TEST(DeepSpeedHost, GptTwosLayerHoldsTransformersTwelveTensorsAndTheModelItsFour) {
  ModelSpec gpt2 = test::small_llama(2);  // GPT-2's shape: learned positions, a tied head, biases, a plain MLP
  gpt2.max_position_embeddings = 1024, gpt2.tie_word_embeddings = true, gpt2.bias = true, gpt2.mlp = MlpKind::plain;
  Scenario sc = test::scenario(gpt2, 2, 1, 1);
  sc.runtime = RuntimeKind::deepspeed;
  const Schedule s = make_schedule(sc, make_plan(sc), 1);
  EXPECT_EQ(hf_parameter_tensors(s.model, 0), 12);  // ln_1, c_attn, c_proj, ln_2, c_fc, c_proj: weight and bias
  EXPECT_EQ(hf_parameter_tensors(s.model, -1), 4);  // wte, wpe, ln_f's two
  EXPECT_EQ(hf_parameter_tensors(s.model), 12 * static_cast<int>(s.model.layers) + 4);
}

EfficiencySpec::DeepSpeedHost with_eager(double forward_us, double backward_us) {
  EfficiencySpec::DeepSpeedHost h = figures();
  h.eager_forward_layer_us = forward_us, h.eager_backward_layer_us = backward_us;
  return h;
}

TEST(DeepSpeedHost, AnEagerLayerAddsItsFiguresToItsForwardRecomputeAndBackward) {
  Scenario sc = deepspeed_scenario(2, /*checkpointing=*/true);
  sc.model.attention = Attention::eager;
  const auto [s, h] = priced(sc, 1, with_eager(200, 300));
  EXPECT_TRUE(eager_attention(s.model, 0));
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, 0), (1000 + 400 + 200) * 1e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::recompute, 0), (2500 + 200) * 1e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::backward, 0), (2000 + 300) * 1e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, -1), 300e-6, 1e-12);  // the rest of the model has no attention
}

TEST(DeepSpeedHost, AnSdpaLayerRunsNoEagerFigure) {
  const Scenario sc = deepspeed_scenario(2);
  const auto [s, h] = priced(sc, 1, with_eager(200, 300));
  EXPECT_FALSE(eager_attention(s.model, 0));
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, 0), 1000e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::backward, 0), 2000e-6, 1e-12);
}

TEST(DeepSpeedHost, CheckpointingAddsTheWrapperToTheForwardAndARecomputePerLayer) {
  const Scenario sc = deepspeed_scenario(1, true);
  const auto [s, h] = priced(sc);
  EXPECT_NEAR(host_s(s, h, ComputeKind::forward, 0), (1000 + 400) * 1e-6, 1e-12);
  EXPECT_NEAR(host_s(s, h, ComputeKind::recompute, 0), 2500e-6, 1e-12);
}

// Each op's host time under one figure set and under another differ exactly on the ops of the passes named.
using PassOf = std::pair<ComputeKind, bool>;  // compute kind, inside a decoder layer
std::set<PassOf> passes_that_differ(const Scenario& sc, const EfficiencySpec::DeepSpeedHost& a,
                                    const EfficiencySpec::DeepSpeedHost& b) {
  const Priced pa = priced(sc, 1, a), pb = priced(sc, 1, b);
  std::set<PassOf> out;
  for (const Op& op : pa.s.ops)
    if (pa.h[op.id].total_s != pb.h[op.id].total_s) out.insert({op.compute.what, op.layer >= 0});
  return out;
}

TEST(DeepSpeedHost, StageThreeUnderCheckpointingPricesItsLayersHooksAtTheForwardsFigureWhenNotGivenApart) {
  const Scenario sc = deepspeed_scenario(3, true);
  const EfficiencySpec::DeepSpeedHost h = figures();
  EXPECT_EQ(h.effective_stage3_checkpoint_forward_module_us(), h.stage3_forward_module_us);
  EXPECT_EQ(h.effective_stage3_recompute_module_us(), h.stage3_forward_module_us);
  const auto [s, host] = priced(sc);
  EXPECT_NEAR(host_s(s, host, ComputeKind::forward, 0), (1000 + 400 + 13 * 50) * 1e-6, 1e-12);
  EXPECT_NEAR(host_s(s, host, ComputeKind::recompute, 0), (2500 + 13 * 50) * 1e-6, 1e-12);
  EXPECT_NEAR(host_s(s, host, ComputeKind::forward, -1), (300 + 6 * 50) * 1e-6, 1e-12);
}

TEST(DeepSpeedHost, TheCheckpointedForwardsFigurePricesTheLayersForwardHooksAndNothingElse) {
  const Scenario sc = deepspeed_scenario(3, true);
  EfficiencySpec::DeepSpeedHost h = figures();
  h.stage3_checkpoint_forward_module_us = 20;
  EXPECT_EQ(passes_that_differ(sc, figures(), h), (std::set<PassOf>{{ComputeKind::forward, true}}));
  const auto [s, host] = priced(sc, 1, h);
  EXPECT_NEAR(host_s(s, host, ComputeKind::forward, 0), (1000 + 400 + 13 * 20) * 1e-6, 1e-12);
}

TEST(DeepSpeedHost, TheRecomputesFigurePricesTheRecomputesHooksAndNothingElse) {
  const Scenario sc = deepspeed_scenario(3, true);
  EfficiencySpec::DeepSpeedHost h = figures();
  h.stage3_recompute_module_us = 90;
  EXPECT_EQ(passes_that_differ(sc, figures(), h), (std::set<PassOf>{{ComputeKind::recompute, true}}));
  const auto [s, host] = priced(sc, 1, h);
  EXPECT_NEAR(host_s(s, host, ComputeKind::recompute, 0), (2500 + 13 * 90) * 1e-6, 1e-12);
}

TEST(DeepSpeedHost, TheCheckpointingFiguresOfStageThreeChangeNothingWithoutCheckpointingOrBelowStageThree) {
  EfficiencySpec::DeepSpeedHost h = figures();
  h.stage3_checkpoint_forward_module_us = 20, h.stage3_recompute_module_us = 90;
  EXPECT_TRUE(passes_that_differ(deepspeed_scenario(3, false), figures(), h).empty());
  EXPECT_TRUE(passes_that_differ(deepspeed_scenario(2, true), figures(), h).empty());
}

TEST(DeepSpeedHost, AZrunScheduleIsNotPricedByIt) {
  Scenario sc = deepspeed_scenario(2);
  sc.runtime = RuntimeKind::zrun;
  const Schedule s = make_schedule(sc, make_plan(sc), 1);
  ClusterSpec c = sc.cluster;
  c.efficiency.deepspeed_host = figures();
  EXPECT_FALSE(deepspeed_host_applies(s, c));
  for (const HostIssue& x : host_issue(s, c)) EXPECT_EQ(x.total_s, 0);
}

// Tiny kernels: the step takes at least the host's time; with the host figures at zero it is far shorter.
TEST(DeepSpeedHost, AStepOfShortKernelsIsAsLongAsTheHost) {
  const Scenario sc = deepspeed_scenario(2);
  const Schedule s = make_schedule(sc, make_plan(sc), 2);
  ClusterSpec c = testing::test_cluster(1, 1);
  const double gpu_only = simulate(c, s).step_s();
  c.efficiency.deepspeed_host = figures();
  const std::vector<HostIssue> h = host_issue(s, c);
  double host_step = 0;
  for (const Op& op : s.ops)
    if (op.kind == OpKind::compute && op.phase != Phase::init) host_step += h[op.id].total_s;
  host_step /= 2;  // two steps
  const TimingResult t = simulate(c, s);
  const double with_host = t.step_s();
  EXPECT_GE(with_host, host_step * 0.999);
  // The report says so: the host's time of the step, which binds it.
  const TimingReport r = summarize(s, t);
  EXPECT_NEAR(r.host_s, host_step, 1e-9);
  EXPECT_TRUE(r.host_binds());
  EXPECT_LT(gpu_only, host_step);
  EXPECT_LT(with_host, host_step + gpu_only);
}

// A scenario of long kernels (16 x 4096 tokens on the small model): its steps are GPU-bound.
Scenario long_kernels(int stage) {
  Scenario sc = deepspeed_scenario(stage);
  sc.training.micro_batch = 16;
  sc.training.seq_len = 4096;
  return sc;
}

// A GPU-bound step hides the host: the same figures barely lengthen a step whose kernels are long.
TEST(DeepSpeedHost, LongKernelsHideTheHost) {
  const Scenario sc = long_kernels(2);
  const Schedule s = make_schedule(sc, make_plan(sc), 2);
  ClusterSpec c = testing::test_cluster(1, 1);
  const double gpu_only = simulate(c, s).step_s();
  c.efficiency.deepspeed_host = figures();
  const TimingResult t = simulate(c, s);
  EXPECT_LT(t.step_s(), gpu_only * 1.05);
  EXPECT_FALSE(summarize(s, t).host_binds());
}

// Stage 3's gradient epilogue synchronizes after each backward: the first op after each micro-step's backward (the
// next micro-step's forward, or the step) waits for the GPU, and no other op does; stage 2 (no overlap_comm) waits
// only at the step's end, the engine's step boundary.
TEST(DeepSpeedHost, StageThreeWaitsForTheGpuAfterEachBackwardAndNowhereElse) {
  Scenario sc = deepspeed_scenario(3);
  sc.training.grad_accum = 2;
  const Priced p = priced(sc, 2);
  const std::vector<int> step_of = find_steps(p.s, nullptr);
  int waits = 0;
  for (const Op& op : p.s.ops) {
    if (!p.h[op.id].waits_for_gpu) continue;
    ++waits;
    ASSERT_GT(op.id, 0);
    EXPECT_EQ(p.s.ops[op.id - 1].phase, Phase::backward);
    EXPECT_NE(op.phase, Phase::backward);
    EXPECT_EQ(step_of[op.id], step_of[op.id - 1]);
  }
  EXPECT_EQ(waits, 2 * 2);  // two micro-steps' backwards in each of two steps
  Scenario stage2 = deepspeed_scenario(2);
  stage2.training.grad_accum = 2;
  for (const HostIssue& x : priced(stage2, 2).h) EXPECT_FALSE(x.waits_for_gpu);
}

// The engine: where the host waits for the GPU, the op after the backward starts only once every op of its step before
// it is done, so a GPU-bound backward's kernels are no longer hidden behind the step's Python.
TEST(DeepSpeedHost, AfterStageThreesBackwardTheHostIssuesNothingUntilTheBackwardsWorkIsDone) {
  const Scenario sc = long_kernels(3);
  const Schedule s = make_schedule(sc, make_plan(sc), 2);
  ClusterSpec c = testing::test_cluster(1, 1);
  EfficiencySpec::DeepSpeedHost h = figures();
  h.step_fixed_us = 50'000;  // the step's Python long enough to show
  c.efficiency.deepspeed_host = h;
  const std::vector<HostIssue> issue = host_issue(s, c);
  const TimingResult t = simulate(c, s);
  const std::vector<int> step_of = find_steps(s, nullptr);
  int checked = 0;
  for (const Op& op : s.ops) {
    if (!issue[op.id].waits_for_gpu) continue;
    double before_done = 0;
    for (const Op& earlier : s.ops)
      if (earlier.id < op.id && step_of[earlier.id] == step_of[op.id])
        before_done = std::max(before_done, t.ops[earlier.id].end_s);
    EXPECT_GE(t.ops[op.id].start_s, before_done - 1e-12) << op.name;
    ++checked;
  }
  EXPECT_EQ(checked, 2);
  // The step's Python (on its first optimizer op) runs after the backward's kernels, not beside them.
  for (const Op& op : s.ops)
    if (op.kind == OpKind::compute && op.compute.what == ComputeKind::optimizer && step_of[op.id] == 1) {
      double backward_done = 0;
      for (const Op& b : s.ops)
        if (b.phase == Phase::backward && step_of[b.id] == 1) backward_done = std::max(backward_done, t.ops[b.id].end_s);
      EXPECT_GE(t.ops[op.id].end_s, backward_done + 0.05 - 1e-9);
      break;
    }
}

// Sum of every op's host seconds.
double total_host_s(const std::vector<HostIssue>& h) {
  double t = 0;
  for (const HostIssue& i : h) t += i.total_s;
  return t;
}

TEST(DeepSpeedHost, OnAHostWhoseLoopRunsSlowerEveryFigureScalesByTheLoopsRatioToTheExponent) {
  const Scenario sc = deepspeed_scenario(3, true);
  EfficiencySpec::DeepSpeedHost slow = figures();
  slow.stage1_reduce_param_us = 5;
  slow.reference_loop_us = 2000, slow.loop_speed_exponent = 0.5, slow.loop_us = 8000;  // (8000 / 2000) ^ 0.5 = 2
  const auto [s, at_reference] = priced(sc, 1);
  const auto [s2, on_slow_host] = priced(sc, 1, slow);
  EXPECT_NEAR(total_host_s(on_slow_host), 2 * total_host_s(at_reference), 1e-12);
  EXPECT_NEAR(host_s(s2, on_slow_host, ComputeKind::forward, 0), 2 * host_s(s, at_reference, ComputeKind::forward, 0),
              1e-12);
}

TEST(DeepSpeedHost, WithoutTheHostsOwnLoopTheFiguresHoldAsFitted) {
  EfficiencySpec::DeepSpeedHost h = figures();
  h.reference_loop_us = 2000, h.loop_speed_exponent = 0.5;  // the profile's, and no loop_us of this host
  EXPECT_EQ(h.host_speed_scale(), 1.0);
  const Scenario sc = deepspeed_scenario(2);
  EXPECT_NEAR(total_host_s(priced(sc, 1, h).h), total_host_s(priced(sc, 1).h), 1e-12);
}

TEST(DeepSpeedHost, TheBackwardsFiguresScaleWithAutogradsLoopAndTheRestWithTheMainThreads) {
  const Scenario sc = deepspeed_scenario(3, true);  // stage 3 with checkpointing: hooks in every pass, a recompute
  EfficiencySpec::DeepSpeedHost two = figures();
  two.reference_loop_us = 2000, two.loop_speed_exponent = 0.5;
  two.loop_us = 8000, two.autograd_loop_us = 500;  // the main thread x 2, autograd's x 0.5
  const auto [s, at_reference] = priced(sc, 1);
  const auto [s2, on_two_threads] = priced(sc, 1, two);
  for (int layer : {-1, 0, 1}) {
    EXPECT_NEAR(host_s(s2, on_two_threads, ComputeKind::forward, layer),
                2 * host_s(s, at_reference, ComputeKind::forward, layer), 1e-12);
    EXPECT_NEAR(host_s(s2, on_two_threads, ComputeKind::backward, layer),
                0.5 * host_s(s, at_reference, ComputeKind::backward, layer), 1e-12);
  }
  EXPECT_GT(host_s(s, at_reference, ComputeKind::recompute, -2), 0);
  EXPECT_NEAR(host_s(s2, on_two_threads, ComputeKind::recompute, -2),
              0.5 * host_s(s, at_reference, ComputeKind::recompute, -2), 1e-12);
  EXPECT_GT(host_s(s, at_reference, ComputeKind::optimizer, -2), 0);
  EXPECT_NEAR(host_s(s2, on_two_threads, ComputeKind::optimizer, -2),
              2 * host_s(s, at_reference, ComputeKind::optimizer, -2), 1e-12);
}

TEST(DeepSpeedHost, StageOnesReductionRunsAtTheMainThreadsSpeedAndStageTwosAtAutogradsThread) {
  EfficiencySpec::DeepSpeedHost reduce_only{};
  reduce_only.stage12_reduce_param_us = 40, reduce_only.stage1_reduce_param_us = 40;
  reduce_only.reference_loop_us = 2000, reduce_only.loop_speed_exponent = 1.0;
  EfficiencySpec::DeepSpeedHost two = reduce_only;
  two.loop_us = 4000, two.autograd_loop_us = 1000;  // the main thread x 2, autograd's x 0.5
  for (int stage : {1, 2}) {
    const Scenario sc = deepspeed_scenario(stage);
    const double at_reference = total_host_s(priced(sc, 1, reduce_only).h);
    ASSERT_GT(at_reference, 0) << stage;
    EXPECT_NEAR(total_host_s(priced(sc, 1, two).h), (stage == 1 ? 2.0 : 0.5) * at_reference, 1e-12) << stage;
  }
}

TEST(DeepSpeedHost, WithoutAutogradsLoopTheBackwardTakesTheMainThreadsSpeed) {
  EfficiencySpec::DeepSpeedHost h = figures();
  h.reference_loop_us = 2000, h.loop_speed_exponent = 0.5, h.loop_us = 8000;
  EXPECT_DOUBLE_EQ(h.autograd_host_speed_scale(), 2.0);
  h.autograd_loop_us = 2000;
  EXPECT_DOUBLE_EQ(h.autograd_host_speed_scale(), 1.0);
  EXPECT_DOUBLE_EQ(h.host_speed_scale(), 2.0);
}

TEST(DeepSpeedHost, AFasterLoopThanTheReferenceShortensTheHost) {
  EfficiencySpec::DeepSpeedHost h = figures();
  h.reference_loop_us = 3000, h.loop_speed_exponent = 1.0, h.loop_us = 1500;
  EXPECT_DOUBLE_EQ(h.host_speed_scale(), 0.5);
}

TEST(DeepSpeedHost, TheReportSaysTheHostSpeedItsFiguresWereTakenAt) {
  Scenario sc = deepspeed_scenario(2);
  const Schedule s = make_schedule(sc, make_plan(sc), 1);
  sc.cluster = testing::test_cluster(1, 1);
  EfficiencySpec::DeepSpeedHost& h = sc.cluster.efficiency.deepspeed_host;
  h = figures();
  EXPECT_EQ(time_schedule(sc, s, {}).report.host_reference_loop_us, 0);  // no reference: nothing said
  h.reference_loop_us = 2000, h.loop_speed_exponent = 0.5;
  const TimeOutputs at_reference = time_schedule(sc, s, {});
  EXPECT_NE(at_reference.terminal.find("at the profile's host speed (reference loop 2.000 ms)"), std::string::npos)
      << at_reference.terminal;
  h.loop_us = 8000;
  const TimeOutputs slow = time_schedule(sc, s, {});
  EXPECT_DOUBLE_EQ(slow.report.host_speed_scale, 2.0);
  EXPECT_NE(slow.terminal.find("its reference loop 8.000 ms, the profile's 2.000 ms (figures x 2.000)"),
            std::string::npos)
      << slow.terminal;
  EXPECT_DOUBLE_EQ(slow.json["host_speed"]["loop_us"].get<double>(), 8000);
  EXPECT_TRUE(slow.json["host_speed"]["autograd_loop_us"].is_null());
  EXPECT_EQ(slow.terminal.find("autograd's thread"), std::string::npos);
  h.autograd_loop_us = 500;
  const TimeOutputs two = time_schedule(sc, s, {});
  EXPECT_DOUBLE_EQ(two.report.host_autograd_speed_scale, 0.5);
  EXPECT_NE(two.terminal.find("the backward's at autograd's thread's loop 0.500 ms (figures x 0.500)"),
            std::string::npos)
      << two.terminal;
  EXPECT_DOUBLE_EQ(two.json["host_speed"]["autograd_loop_us"].get<double>(), 500);
  EXPECT_DOUBLE_EQ(two.json["host_speed"]["autograd_scale"].get<double>(), 0.5);
}

}  // namespace
}  // namespace zsim
