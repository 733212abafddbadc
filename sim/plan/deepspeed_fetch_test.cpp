// runtime: deepspeed, stage 3: the parameter gathers DeepSpeed 0.14.5's PartitionedParameterCoordinator issues
// (partitioned_param_coordinator.py fetch_sub_module / release_sub_module, driven by parameter_offload.py's module
// hooks), stated from its code's rules on small models, and on the 1.3B model against the record of a real run.
#include <gtest/gtest.h>

#include <numeric>

#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"

using namespace zsim;

namespace {

// small_llama(L) at stage 3 on 8 ranks, DeepSpeed's defaults but persistence 0 (test::scenario): every tensor is
// gathered. Units: embedding 512Ki, attn.norm 512, q/k/v/o 256Ki each, mlp.norm 512, gate/up/down 512Ki each,
// final.norm 512, head 512Ki.
Scenario ds(int layers = 3) {
  Scenario s = test::scenario(test::small_llama(layers), 3, 1, 8);
  s.runtime = RuntimeKind::deepspeed;
  s.training.activation_checkpointing = Checkpointing::none;
  s.zero.stage3_prefetch_bucket_size = 50'000'000;
  s.zero.stage3_max_live_parameters = 1'000'000'000;
  s.zero.stage3_max_reuse_distance = 1'000'000'000;
  return s;
}

// The all-gathers of the first micro-step's forward or backward, in program order: their bytes.
std::vector<Bytes> gathers(const Schedule& sch, Phase ph) {
  std::vector<Bytes> out;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::collective && op.collective.what == CollectiveKind::all_gather && op.phase == ph &&
        op.micro_step == 0)
      out.push_back(op.collective.bytes);
  return out;
}
std::vector<Bytes> gathers(const Scenario& s, Phase ph) { return gathers(make_schedule(s, make_plan(s)), ph); }

Elements gathered(const Plan& p, const std::vector<int>& units) {
  Elements n = 0;
  for (int u : units) n += p.units[u].gathered;
  return n;
}

std::vector<FetchAction> gather_actions(const Plan& p, bool prefetch) {
  std::vector<FetchAction> out;
  for (const FetchStep& st : p.trace)
    for (const FetchAction& a : st.actions)
      if (a.kind == FetchAction::Kind::gather && a.prefetch == prefetch) out.push_back(a);
  return out;
}

}  // namespace

// With stage3_max_live_parameters and stage3_max_reuse_distance above the model (DeepSpeed's 1e9 defaults) and a
// prefetch bucket above it, the first hook's prefetch gathers the whole model in one call, nothing is released
// before its backward use, and the backward gathers nothing.
TEST(DeepSpeedFetch, UnderDeepSpeedStage3KeepsEveryParameterGatheredWhenMaxLiveExceedsTheModel) {
  const Scenario s = ds();
  const Plan p = make_plan(s);
  Elements model = 0;
  for (const FetchUnit& u : p.units) model += u.gathered;
  EXPECT_EQ(gathers(s, Phase::forward), (std::vector<Bytes>{2 * model}));
  EXPECT_TRUE(gathers(s, Phase::backward).empty());
  for (const FetchStep& st : p.trace)
    if (st.phase == Phase::forward) EXPECT_TRUE(st.release.empty()) << p.units[st.unit].name;
}

// fetch_sub_module's prefetch pops the parameter queue while the numel it has taken is below
// min(max_live - available, stage3_prefetch_bucket_size): each batch ends with the unit that reaches the bucket.
TEST(DeepSpeedFetch, UnderDeepSpeedStage3PrefetchCoalescesUpToThePrefetchBucket) {
  Scenario s = ds();
  const Elements bucket = 600'000;
  s.zero.stage3_prefetch_bucket_size = bucket;
  const Plan p = make_plan(s);
  const std::vector<FetchAction> batches = gather_actions(p, true);
  ASSERT_GT(batches.size(), 4u);
  for (size_t i = 0; i + 1 < batches.size(); ++i) {  // the last batch takes what is left
    const Elements n = gathered(p, batches[i].units);
    EXPECT_GE(n, bucket) << "batch " << i;
    EXPECT_LT(n - p.units[batches[i].units.back()].gathered, bucket) << "batch " << i;
  }
  // The first batch: the embedding (512Ki), then L0's attn.norm (512) and q (256Ki), which reaches 600'000.
  EXPECT_EQ(batches[0].units, (std::vector<int>{0, 1, 2}));
  // Every unit is gathered once, by a prefetch: no module waits on a fetch of its own.
  EXPECT_TRUE(gather_actions(p, false).empty());
}

// The model's and its base model's forward pre-hooks (no parameters of their own) run fetch_sub_module before the
// embedding's: two prefetch batches are issued before the embedding computes, and the embedding is not fetched
// on its own.
TEST(DeepSpeedFetch, UnderDeepSpeedStage3TheModelsOwnHooksPrefetchBeforeTheEmbedding) {
  Scenario s = ds();
  s.zero.stage3_prefetch_bucket_size = 600'000;
  const Plan p = make_plan(s);
  const std::vector<FetchAction>& first = p.trace[0].actions;
  ASSERT_GE(first.size(), 3u);
  EXPECT_EQ(first[0].kind, FetchAction::Kind::gather);
  EXPECT_TRUE(first[0].prefetch);
  EXPECT_EQ(first[1].kind, FetchAction::Kind::gather);
  EXPECT_TRUE(first[1].prefetch);
  EXPECT_EQ(first[1].units, (std::vector<int>{3, 4, 5}));  // k, v, o: 768Ki
  EXPECT_EQ(first[2].kind, FetchAction::Kind::wait);       // the embedding's own fetch_sub_module: only its wait
  EXPECT_EQ(first[2].units, (std::vector<int>{0}));
}

// reset_step zeroes __n_available_params after the backward, then the step's release_and_reset_all subtracts what
// is still gathered (the embedding: its post-backward hook never fires): the next forward starts 512Ki below zero,
// so even with stage3_max_live_parameters 1 the first hook prefetches the embedding and L0's attn.norm; then the
// count is above the limit and every module gathers its own parameters.
TEST(DeepSpeedFetch, UnderDeepSpeedStage3MaxLiveCountsFromBelowZeroAfterTheStep) {
  Scenario s = ds();
  s.zero.stage3_max_live_parameters = 1;
  const Plan p = make_plan(s);
  const std::vector<FetchAction> batches = gather_actions(p, true);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].units, (std::vector<int>{0, 1}));
  EXPECT_EQ(p.trace[0].actions.front().units, (std::vector<int>{0, 1}));
  for (const FetchStep& st : p.trace)  // every other unit: one call of its own in its forward
    if (st.phase == Phase::forward && st.unit > 1) {
      ASSERT_FALSE(st.actions.empty()) << p.units[st.unit].name;
      EXPECT_EQ(st.actions.front().units, std::vector<int>{st.unit});
      EXPECT_FALSE(st.actions.front().prefetch);
    }
}

// The embedding's input (token ids) needs no gradient, so its post-backward release never fires: it stays gathered
// from its backward fetch until the optimizer step's release_and_reset_all, after the micro-step's last step.
TEST(DeepSpeedFetch, UnderDeepSpeedStage3TheEmbeddingStaysGatheredUntilTheStep) {
  Scenario s = ds();
  s.zero.stage3_prefetch_bucket_size = 0;
  s.zero.stage3_max_reuse_distance = 0;
  const Plan p = make_plan(s);
  EXPECT_EQ(p.trace[0].release, std::vector<int>{0});  // the forward's post-hook does release it
  const FetchStep& last = p.trace.back();
  ASSERT_EQ(last.unit, 0);
  ASSERT_EQ(last.phase, Phase::backward);
  EXPECT_EQ(last.release, std::vector<int>{0});
  for (size_t i = p.units.size(); i + 1 < p.trace.size(); ++i)  // every other backward use releases its unit
    EXPECT_EQ(p.trace[i].release, std::vector<int>{p.trace[i].unit}) << p.units[p.trace[i].unit].name;
}

// Non-reentrant checkpointing: a layer's backward starts with the pre-backward hooks of the layer, its MLP and its
// last module (down_proj), whose backward then runs the recompute; without prefetch or reuse every use gathers its
// module, but down_proj is gathered before the recompute and used by both: 2 x units + layer units - layers calls.
TEST(DeepSpeedFetch, UnderDeepSpeedStage3ACheckpointedLayerGathersItsLastModuleBeforeItsRecompute) {
  Scenario s = ds(4);
  s.training.activation_checkpointing = Checkpointing::full;
  s.zero.stage3_prefetch_bucket_size = 0;
  s.zero.stage3_max_reuse_distance = 0;
  const Plan p = make_plan(s);
  size_t units = 0, layer_units = 0;
  for (const FetchUnit& u : p.units) units += u.gathered > 0, layer_units += u.gathered > 0 && u.layer >= 0;
  const size_t layers = p.layers.size();
  EXPECT_EQ(gathers(s, Phase::forward).size() + gathers(s, Phase::backward).size(),
            2 * units + layer_units - layers);
  for (const FetchStep& st : p.trace)
    if (st.recompute) {
      ASSERT_FALSE(st.actions.empty());
      EXPECT_EQ(st.actions.front().units, std::vector<int>{p.layers[st.layer].last});  // down_proj, then the recompute
    }
}

// release_sub_module keeps a parameter whose later use the prefetch has already passed
// (__most_recent_step_id_param_fetched_for > step), even with stage3_max_reuse_distance 0: with a prefetch bucket
// above the model the first hook gathers everything and pops the whole queue, so nothing is released before its
// backward use and the backward gathers nothing.
TEST(DeepSpeedFetch, UnderDeepSpeedStage3ReleaseKeepsWhatThePrefetchLookedPastEvenWithoutReuse) {
  Scenario s = ds();
  s.zero.stage3_max_reuse_distance = 0;
  EXPECT_EQ(gathers(s, Phase::forward).size(), 1u);
  EXPECT_TRUE(gathers(s, Phase::backward).empty());
}

// Under runtime zrun the schedule keeps zsim's own trace (one call per module use and one per prefetch window).
TEST(DeepSpeedFetch, UnderZrunStage3KeepsZsimsOwnTrace) {
  Scenario s = ds();
  s.runtime = RuntimeKind::zrun;
  const Plan p = make_plan(s);
  for (const FetchStep& st : p.trace) EXPECT_TRUE(st.actions.empty());
  EXPECT_FALSE(p.trace[0].fetch.empty());
}

// The record (validate/results/h200-deepspeed/runs/l1.3b-z3-w2-mb1-s2048-sdpa-ckpt.json, DeepSpeed 0.14.5, 2 ranks,
// stage 3 at DeepSpeed's defaults, full checkpointing): the all-gathers of one step, in order, output bytes.
TEST(DeepSpeedFetch, UnderDeepSpeedStage3GathersAsTheRecordedLlama13BCheckpointedRun) {
  ModelSpec m;
  m.name = "llama-1.3b";
  m.layers = 24, m.hidden = 2048, m.ffn_hidden = 5632, m.heads = 16, m.kv_heads = 4, m.vocab = 32000;
  Scenario s = test::scenario(m, 3, 1, 2);
  s.runtime = RuntimeKind::deepspeed;
  s.training.activation_checkpointing = Checkpointing::full;
  s.zero.stage3_param_persistence_threshold = 100'000;
  s.zero.stage3_prefetch_bucket_size = 50'000'000;
  s.zero.stage3_max_live_parameters = 1'000'000'000;
  s.zero.stage3_max_reuse_distance = 1'000'000'000;
  const Bytes embed = 131'072'000, a = 100'663'296, b = 113'246'208, down = 23'068'672;
  std::vector<Bytes> forward{embed};
  for (int k = 0; k < 4; ++k) forward.insert(forward.end(), {a, a, b, b, b});
  forward.insert(forward.end(), {embed, down});  // the head, then L1's down_proj again (for its recompute)
  EXPECT_EQ(gathers(s, Phase::forward), forward);
  EXPECT_EQ(gathers(s, Phase::backward), (std::vector<Bytes>{a, 33'554'432, down, embed}));
}
