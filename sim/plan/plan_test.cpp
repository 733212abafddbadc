#include "sim/plan/plan.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "sim/plan/test_scenarios.hpp"

using namespace zsim;

TEST(Plan, ProcessGroupsDescribeWorldHpzIntraAndInterNode) {
  Scenario s = test::scenario(test::small_llama(), 3, 4, 8);
  s.zero.zero_hpz_partition_size = 4;
  const Plan p = make_plan(s);
  EXPECT_EQ(p.dp, 32);
  EXPECT_EQ(p.world.size, 32);
  EXPECT_EQ(p.world.nodes_spanned(), 4);
  EXPECT_EQ(p.hpz.size, 4);
  EXPECT_FALSE(p.hpz.crosses_nodes());
  EXPECT_EQ(p.intra_node.size, 8);
  EXPECT_EQ(p.inter_node.size, 4);
  EXPECT_EQ(p.inter_node.stride, 8);
  EXPECT_EQ(p.inter_node.nodes_spanned(), 4);
}

TEST(Plan, HpzSizeMustDivideGpusPerNode) {
  Scenario s = test::scenario(test::small_llama(), 3, 2, 8);
  s.zero.zero_hpz_partition_size = 3;
  EXPECT_THROW(make_plan(s), std::invalid_argument);
}

TEST(Plan, UnitsAreModulesInForwardOrder) {
  const Plan p = make_plan(test::scenario(test::small_llama(3), 3, 1, 8));
  // embedding; per layer: attn.norm, q, k, v, o, mlp.norm, gate, up, down; final norm; head
  ASSERT_EQ(p.units.size(), 1u + 3 * 9 + 2);
  EXPECT_EQ(p.units.front().name, "embedding");
  EXPECT_EQ(p.units[1].name, "L0.attn.norm");
  EXPECT_EQ(p.units[5].name, "L0.attn.o");
  EXPECT_TRUE(p.units[5].attention_core);
  ASSERT_EQ(p.layers.size(), 3u);
  EXPECT_EQ(p.layers[1].first, 10);
  EXPECT_EQ(p.layers[1].last, 18);
  EXPECT_EQ(p.units[p.layers[1].last].name, "L1.mlp.down");
  EXPECT_EQ(p.units[p.units.size() - 2].name, "final.norm");
  EXPECT_TRUE(p.units.back().is_head);
  Elements sum = 0;
  for (const auto& u : p.units) sum += u.params;
  EXPECT_EQ(sum, p.params);
}

TEST(Plan, PersistenceThresholdKeepsSmallTensorsWhole) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
  s.zero.stage3_param_persistence_threshold = 512;  // the 512-wide RMSNorm weights
  const Plan p = make_plan(s);
  EXPECT_EQ(p.units[1].persistent, 512);  // L0.attn.norm
  EXPECT_EQ(p.units[1].gathered, 0);
  EXPECT_EQ(p.units[2].gathered, p.units[2].params);  // L0.attn.q
  EXPECT_EQ(p.persistent_params, 2 * (2 * 512) + 512);  // 2 norms per layer + the final norm
}

// offload_param nvme (stage3.py _create_param_groups_fp16_flat_cpu_memory): whole sub-groups stay in CPU memory
// while their running total is within max_in_cpu; the partition from the first one past it is on NVMe.
TEST(Plan, ParamOffloadToNvmeKeepsTheSubGroupsWithinMaxInCpuInCpuMemory) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  s.zero.offload_param.device = OffloadDevice::nvme;
  s.zero.sub_group_size = 100'000;
  Plan p = make_plan(s);
  ASSERT_GT(p.sub_groups.size(), 3u);
  EXPECT_EQ(p.nvme_params_from, p.optimizer_partition);  // max_in_cpu 1e9 holds this model's partition
  s.zero.offload_param.max_in_cpu = 250'000;  // two and a half sub-groups: two of them
  p = make_plan(s);
  EXPECT_EQ(p.nvme_params_from, 200'000);
  s.zero.offload_param.max_in_cpu = 0;
  EXPECT_EQ(make_plan(s).nvme_params_from, 0);
  s.zero.offload_param.device = OffloadDevice::cpu;  // max_in_cpu applies to NVMe only
  p = make_plan(s);
  EXPECT_EQ(p.nvme_params_from, p.optimizer_partition);
}

TEST(Plan, GradientBucketsRespectReduceBucketSize) {
  Scenario s = test::scenario(test::small_llama(4), 2, 1, 8);
  const Plan one = make_plan(s);
  EXPECT_EQ(one.buckets.size(), 1u);  // 500M elements hold the whole small model
  s.zero.reduce_bucket_size = one.shapes.layer.params();  // about one layer per bucket
  const Plan p = make_plan(s);
  Elements sum = 0;
  for (const auto& b : p.buckets) {
    EXPECT_LE(b.elements, s.zero.reduce_bucket_size);
    EXPECT_LE(b.closes_after, b.opens_at);  // backward runs from high units to low
    sum += b.elements;
  }
  EXPECT_EQ(sum, p.params);
  EXPECT_GE(static_cast<Elements>(p.buckets.size()), (p.params + s.zero.reduce_bucket_size - 1) / s.zero.reduce_bucket_size);
}

// DeepSpeed's all_gather_dp_groups (runtime/utils.py): max(1, partition x N // allgather_bucket_size) shards
// of every rank's partition, each shard rounded down to the alignment factor 2, the last taking the rest.
TEST(Plan, StepAllGathersAreDeepSpeedsShardsOfThePartition) {
  Scenario s = test::scenario(test::small_llama(4), 1, 1, 8);
  s.runtime = RuntimeKind::zrun;  // zrun's shards (DeepSpeed with torch's all_gather_into_tensor: one call, below)
  s.zero.allgather_bucket_size = 1'000'000;
  const Plan p = make_plan(s);
  EXPECT_EQ(p.param_partition % 2, 0);
  EXPECT_EQ(p.param_partition * 8 % 16, 0);  // padded to a multiple of 2N
  EXPECT_LT(p.param_partition * 8 - p.params, 16);
  const Elements shards = std::max<Elements>(1, p.param_partition * 8 / 1'000'000);
  Elements shard = p.param_partition / shards;
  shard -= shard % 2;
  ASSERT_EQ(p.allgather_chunks.size(), static_cast<size_t>(shards));
  Elements sum = 0;
  for (size_t i = 0; i + 1 < p.allgather_chunks.size(); ++i) EXPECT_EQ(p.allgather_chunks[i], shard);
  for (Elements c : p.allgather_chunks) sum += c;
  EXPECT_EQ(sum, p.param_partition);
}

// runtime deepspeed: torch has all_gather_into_tensor, so all_gather_dp_groups takes all_gather_into_tensor_dp_groups:
// one all-gather of the whole partition per parameter group, whatever allgather_bucket_size says.
TEST(Plan, UnderDeepSpeedTheStepAllGathersTheWholePartitionInOneCall) {
  Scenario s = test::scenario(test::small_llama(4), 1, 1, 8);
  s.zero.allgather_bucket_size = 1'000'000;
  const Plan p = make_plan(s);
  EXPECT_EQ(p.allgather_chunks, std::vector<Elements>{p.param_partition});
}

TEST(Plan, OneRankGathersNoParametersAfterTheStep) {
  const Plan p = make_plan(test::scenario(test::small_llama(2), 2, 1, 1));
  EXPECT_TRUE(p.allgather_chunks.empty());
}

// Without prefetch and reuse every use gathers its unit and releases it.
TEST(Plan, WithoutPrefetchOrReuseEveryUseFetchesAndReleasesItsUnit) {
  Scenario s = test::scenario(test::small_llama(3), 3, 1, 8);
  s.runtime = RuntimeKind::zrun;  // zrun's trace (DeepSpeed's coordinator: deepspeed_fetch_test.cpp)
  s.training.activation_checkpointing = Checkpointing::none;
  s.zero.stage3_prefetch_bucket_size = 0;
  s.zero.stage3_max_reuse_distance = 0;
  const Plan p = make_plan(s);
  ASSERT_EQ(p.trace.size(), 2 * p.units.size());
  for (const auto& st : p.trace) {
    EXPECT_EQ(st.fetch, std::vector<int>{st.unit});
    EXPECT_TRUE(st.prefetch.empty());
    EXPECT_EQ(st.release, std::vector<int>{st.unit});
  }
}

// With a reuse distance the head, whose backward directly follows its forward, stays gathered.
TEST(Plan, ReuseWithinTheWindowKeepsTheHeadGathered) {
  Scenario s = test::scenario(test::small_llama(3), 3, 1, 8);
  s.runtime = RuntimeKind::zrun;  // zrun's trace (DeepSpeed's coordinator: deepspeed_fetch_test.cpp)
  s.zero.stage3_max_reuse_distance = 1;
  const Plan p = make_plan(s);
  const int head = static_cast<int>(p.units.size()) - 1;
  const FetchStep& head_fwd = p.trace[head];
  const FetchStep& head_bwd = p.trace[head + 1];
  ASSERT_EQ(head_fwd.unit, head);
  EXPECT_TRUE(head_fwd.release.empty());
  EXPECT_TRUE(head_bwd.fetch.empty());
  EXPECT_EQ(head_bwd.release, std::vector<int>{head});
}

// Units: embedding 512Ki, attn.norm 512, q/k/v/o 256Ki each, mlp.norm 512, gate/up/down 512Ki each.
TEST(Plan, PrefetchGathersAheadWithinBucketAndMaxLive) {
  Scenario s = test::scenario(test::small_llama(6), 3, 1, 8);
  s.runtime = RuntimeKind::zrun;  // zrun's trace (DeepSpeed's coordinator: deepspeed_fetch_test.cpp)
  s.training.activation_checkpointing = Checkpointing::none;
  s.zero.stage3_max_reuse_distance = 0;
  const Elements q = 512 * 512;
  s.zero.stage3_prefetch_bucket_size = 2 * q + 512;  // a norm and two projections ahead
  const Plan p = make_plan(s);
  EXPECT_EQ(p.trace[0].prefetch, (std::vector<int>{1, 2, 3}));  // attn.norm, q, k
  EXPECT_TRUE(p.trace[1].prefetch.empty());                      // q and k already fill the window
  EXPECT_EQ(p.trace[2].prefetch, (std::vector<int>{4}));         // at q: v joins k in the window
  EXPECT_TRUE(p.trace[2].fetch.empty());
  s.zero.stage3_max_live_parameters = q;  // nothing beyond the projection in use may be live
  const Plan tight = make_plan(s);
  for (const auto& st : tight.trace) EXPECT_TRUE(st.prefetch.empty());
}

// Full checkpointing adds one recompute step per layer, before its backward, using all its units.
TEST(Plan, CheckpointingRecomputesEachLayerBeforeItsBackward) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
  const Plan p = make_plan(s);
  ASSERT_EQ(p.trace.size(), 2 * p.units.size() + 2);
  int recomputes = 0;
  for (size_t i = 0; i < p.trace.size(); ++i) {
    if (!p.trace[i].recompute) continue;
    ++recomputes;
    const FetchStep& rc = p.trace[i];
    EXPECT_EQ(rc.phase, Phase::backward);
    EXPECT_EQ(rc.uses.size(), 9u);
    EXPECT_EQ(p.trace[i + 1].unit, p.layers[rc.layer].last);  // then the backward of the layer's last unit
  }
  EXPECT_EQ(recomputes, 2);
}

TEST(Plan, QgzNeedsStage3AndMoreThanOneNode) {
  Scenario s = test::scenario(test::small_llama(), 3, 1, 8);
  s.zero.zero_quantized_gradients = true;
  EXPECT_FALSE(make_plan(s).qgz);
  s.cluster.nodes = 2;
  EXPECT_TRUE(make_plan(s).qgz);
  s.zero.stage = 2;
  EXPECT_FALSE(make_plan(s).qgz);
}

// fp32 training: stage 0 updates the model's fp32 weights in place (exp_avg and exp_avg_sq only); ZeRO stages
// clone the fp32 partition into a master copy all the same (stage_1_and_2.py single_partition_of_fp32_groups,
// stage3.py _create_fp32_partitions), so they keep 12 bytes per parameter.
TEST(Plan, Fp32TrainingKeepsASeparateMasterCopyOnlyUnderZero) {
  Scenario s = test::scenario(test::small_llama(), 2, 1, 8);
  EXPECT_EQ(make_plan(s).optimizer_bytes_per_param, 12);
  s.training.precision = Precision::fp32;
  EXPECT_EQ(make_plan(s).optimizer_bytes_per_param, 12);
  EXPECT_EQ(make_plan(s).elem_bytes, 4);
  for (int stage : {1, 3}) {
    s.zero.stage = stage;
    EXPECT_EQ(make_plan(s).optimizer_bytes_per_param, 12) << stage;
  }
  s.zero.stage = 0;
  EXPECT_EQ(make_plan(s).optimizer_bytes_per_param, 8);
  s.zero.stage = 2;
  s.zero.offload_optimizer.device = OffloadDevice::cpu;  // CPU Adam keeps its own fp32 master copy
  EXPECT_EQ(make_plan(s).optimizer_bytes_per_param, 12);
}

// communication_data_type: the reductions' dtype, by default the training dtype (engine.py).
TEST(Plan, CommunicationDtypeDefaultsToTheTrainingDtype) {
  Scenario s = test::scenario(test::small_llama(), 2, 1, 8);
  EXPECT_EQ(make_plan(s).comm_dtype, DType::bf16);
  s.training.communication_data_type = Precision::fp32;
  EXPECT_EQ(make_plan(s).comm_dtype, DType::fp32);
}

// A unit is kept when fewer than stage3_max_reuse_distance elements are traversed before its next use:
// the last layer's forward-to-backward distance is the head twice.
TEST(Plan, ReuseDistanceCountsTheParamsTraversedBeforeTheNextUse) {
  Scenario s = test::scenario(test::small_llama(3), 3, 1, 8);
  s.zero.stage3_prefetch_bucket_size = 0;
  const Plan base = make_plan(s);
  const int last = static_cast<int>(base.units.size()) - 2;  // L2
  const Elements distance = 2 * base.units.back().gathered;
  s.zero.stage3_max_reuse_distance = distance;
  EXPECT_EQ(make_plan(s).trace[last].release, std::vector<int>{last});  // not fewer than: released
  s.zero.stage3_max_reuse_distance = distance + 1;
  EXPECT_TRUE(make_plan(s).trace[last].release.empty());
}

TEST(Plan, WarnsWhereItDepartsFromTheScenario) {
  Scenario s = test::scenario(test::small_llama(), 3, 1, 8);
  s.zero.zero_quantized_gradients = true;
  EXPECT_EQ(make_plan(s).warnings.size(), 1u);  // qgZ on one node
  s.cluster.nodes = 2;
  EXPECT_TRUE(make_plan(s).warnings.empty());
  s.zero.stage = 2;
  EXPECT_EQ(make_plan(s).warnings.size(), 1u);  // ZeRO++ below stage 3
}
