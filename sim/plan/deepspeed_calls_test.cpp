// runtime: deepspeed: DeepSpeed 0.14.5's collective calls outside stage 3's parameter gathers (deepspeed_fetch_test.cpp):
// the optimizer step's gradient-norm all-reduces, BF16_Optimizer at stage 0, the engine's all-reduce fallback
// buckets, ZeRO-1/2's one-call parameter all-gather, qgZ's per-tensor all-to-alls.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <tuple>

#include "sim/plan/quantization.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"

using namespace zsim;

namespace {

Scenario ds(int stage, int nodes = 1, int gpus = 8) {
  Scenario s = test::scenario(test::small_llama(2), stage, nodes, gpus);
  s.runtime = RuntimeKind::deepspeed;
  return s;
}

std::vector<const Op*> collectives(const Schedule& sch, CollectiveKind k, Phase ph) {
  std::vector<const Op*> out;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::collective && op.collective.what == k && op.phase == ph) out.push_back(&op);
  return out;
}
Schedule build(const Scenario& s) { return make_schedule(s, make_plan(s)); }

// Whether op `to` depends on op `from` (through deps).
bool after(const Schedule& sch, OpId to, OpId from) {
  std::vector<char> seen(sch.ops.size(), 0);
  std::function<bool(OpId)> reach = [&](OpId id) {
    if (id == from) return true;
    if (id < from || seen[id]) return false;
    seen[id] = 1;
    for (OpId d : sch.ops[id].deps)
      if (reach(d)) return true;
    return false;
  };
  return reach(to);
}

}  // namespace

// stage_1_and_2.py step -> scaled_global_norm -> get_grad_norm_direct: the squared norms summed as one fp32 scalar,
// all-reduced over the data-parallel group before the update.
TEST(DeepSpeedCalls, UnderDeepSpeedStages1And2AllReduceTheGradientNormAsOneFp32ScalarBeforeTheUpdate) {
  for (int stage : {1, 2}) {
    const Schedule sch = build(ds(stage));
    const auto norm = collectives(sch, CollectiveKind::all_reduce, Phase::step);
    ASSERT_EQ(norm.size(), 1u) << stage;
    EXPECT_EQ(norm[0]->collective.bytes, 4);
    EXPECT_EQ(norm[0]->collective.dtype, DType::fp32);
    for (const Op& op : sch.ops)
      if (op.kind == OpKind::compute && op.compute.what == ComputeKind::optimizer)
        EXPECT_TRUE(after(sch, op.id, norm[0]->id)) << op.name;
  }
}

// stage3.py _get_norm_groups: get_grad_norm_direct per sub-group (fp16_groups holds one entry a sub-group), the norms
// summed in double: one fp64 scalar all-reduce per sub-group.
TEST(DeepSpeedCalls, UnderDeepSpeedStage3AllReducesAnFp64GradientNormPerSubGroup) {
  Scenario s = ds(3);
  s.zero.sub_group_size = 400'000;
  const Plan p = make_plan(s);
  ASSERT_GT(p.sub_groups.size(), 1u);
  const Schedule sch = make_schedule(s, p);
  const auto norm = collectives(sch, CollectiveKind::all_reduce, Phase::step);
  ASSERT_EQ(norm.size(), p.sub_groups.size());
  for (const Op* op : norm) {
    EXPECT_EQ(op->collective.bytes, 8);
    EXPECT_EQ(op->collective.dtype, DType::fp64);
  }
}

// stage3.py complete_grad_norm_calculation_for_cpu_offload: `FloatTensor([float(total_norm)])`, an fp32 scalar.
TEST(DeepSpeedCalls, UnderDeepSpeedStage3WithTheOptimizerOffloadedTheNormIsFp32) {
  Scenario s = ds(3);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  const Schedule sch = build(s);
  const auto norm = collectives(sch, CollectiveKind::all_reduce, Phase::step);
  ASSERT_EQ(norm.size(), 1u);
  EXPECT_EQ(norm[0]->collective.bytes, 4);
  EXPECT_EQ(norm[0]->collective.dtype, DType::fp32);
}

// engine.py: stage 0 with bf16 (fp32 gradient accumulation) wraps the optimizer in BF16_Optimizer, which keeps 1/N
// of the fp32 master and Adam state per rank and, after the update, all-gathers the bf16 flat buffer
// (update_lp_params -> all_gather_dp_groups -> one all_gather_into_tensor); it all-reduces no norm.
TEST(DeepSpeedCalls, UnderDeepSpeedStage0Bf16TheBf16OptimizerAllGathersThePartitionAfterTheStep) {
  const Scenario s = ds(0);
  const Plan p = make_plan(s);
  EXPECT_TRUE(p.bf16_optimizer);
  EXPECT_EQ(p.param_partition * 8 % 16, 0);
  EXPECT_EQ(p.optimizer_partition, p.param_partition);
  const Schedule sch = make_schedule(s, p);
  const auto ag = collectives(sch, CollectiveKind::all_gather, Phase::step);
  ASSERT_EQ(ag.size(), 1u);
  EXPECT_EQ(ag[0]->collective.bytes, 2 * 8 * p.param_partition);
  EXPECT_TRUE(collectives(sch, CollectiveKind::all_reduce, Phase::step).empty());
  Scenario fp32 = s;  // fp32 training: the engine's own optimizer, nothing partitioned or gathered
  fp32.training.precision = Precision::fp32;
  EXPECT_FALSE(make_plan(fp32).bf16_optimizer);
  EXPECT_TRUE(collectives(build(fp32), CollectiveKind::all_gather, Phase::step).empty());
}

// engine.py allreduce_no_retain: the fallback walks the gradients in model order and all-reduces a bucket once its
// numel exceeds 5e8 (MEMORY_OPT_ALLREDUCE_SIZE), the tensor that crosses it included.
TEST(DeepSpeedCalls, UnderDeepSpeedStage0TheFallbackBucketsCloseAfterTheTensorThatCrossesTheirSize) {
  Scenario s = test::scenario(test::llama2_7b(), 0, 1, 8);
  s.runtime = RuntimeKind::deepspeed;
  s.training.precision = Precision::fp16;  // the engine's own reduction of the parameters' gradients (no BF16_Optimizer)
  const Plan p = make_plan(s);
  ASSERT_GT(p.buckets.size(), 2u);
  Elements sum = 0;
  for (size_t i = 0; i < p.buckets.size(); ++i) {
    const GradBucket& b = p.buckets[i];
    sum += b.elements;
    if (i == 0) continue;  // backward order: the model's last bucket, what is left
    EXPECT_GT(b.elements, kAllreduceFallbackBucket) << i;
    EXPECT_LE(b.elements - b.tensors.front().numel(), kAllreduceFallbackBucket) << i;  // front: its last in model order
  }
  EXPECT_EQ(sum, p.params);
  EXPECT_EQ(collectives(build(s), CollectiveKind::all_reduce, Phase::backward).size(), p.buckets.size());
}

// coalesced_collectives.py all_to_all_quant_reduce: per gradient matrix that divides by 2 x world, four
// all_to_all_single calls (its int4 values, then its fp32 scales, on the intra-node group; the same of the
// intra-node-reduced slice on the inter-node group); every other tensor its own reduce_scatter_coalesced([tensor]).
TEST(DeepSpeedCalls, UnderDeepSpeedQgzAllToAllsEachTensorsValuesAndScalesAtBothHops) {
  Scenario s = ds(3, 2, 4);
  s.zero.zero_quantized_gradients = true;
  const Plan p = make_plan(s);
  ASSERT_TRUE(p.qgz);
  std::vector<TensorShape> matrices;
  size_t others = 0;
  for (const FetchUnit& u : p.units)
    for (const TensorShape& t : u.tensors) {
      if (qgz_applies(t.rows, t.cols, p.dp)) matrices.push_back(t);
      else ++others;
    }
  ASSERT_FALSE(matrices.empty());
  ASSERT_GT(others, 0u);
  const Schedule sch = make_schedule(s, p);
  const auto a2a = collectives(sch, CollectiveKind::all_to_all, Phase::backward);
  ASSERT_EQ(a2a.size(), 4 * matrices.size());
  std::multiset<std::tuple<std::string, Bytes, DType>> got, want;
  for (const Op* op : a2a) got.insert({sch.groups[op->collective.group].name, op->collective.bytes, op->collective.dtype});
  for (const TensorShape& t : matrices) {
    const QgzSizes q = qgz_sizes(t.rows, t.cols, p.dp, 4);
    want.insert({"intra_node", q.intra.data, DType::int4});
    want.insert({"intra_node", q.intra.scales, DType::fp32});
    want.insert({"inter_node", q.inter.data, DType::int4});
    want.insert({"inter_node", q.inter.scales, DType::fp32});
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(collectives(sch, CollectiveKind::reduce_scatter, Phase::backward).size(), others);
  Scenario zrun = s;  // zrun: one all-to-all per hop and bucket, one reduce-scatter of the bucket's other tensors
  zrun.runtime = RuntimeKind::zrun;
  const Plan zp = make_plan(zrun);
  EXPECT_EQ(collectives(make_schedule(zrun, zp), CollectiveKind::all_to_all, Phase::backward).size(),
            2 * zp.buckets.size());
}

// partition_parameters.py all_gather_coalesced: with one partition (num_partitions == 1) _no_gather_coalesced points
// each parameter at its partition, which is the whole tensor: no all-gather and no gathered buffer, in the forward,
// the backward or the step's persistent gather; the gradients are still reduce-scattered (a call on one rank).
TEST(DeepSpeedCalls, UnderDeepSpeedOneRankGathersNoParameters) {
  Scenario s = ds(3, 1, 1);
  s.zero.stage3_param_persistence_threshold = 100'000;
  const Schedule sch = build(s);
  for (Phase ph : {Phase::forward, Phase::backward, Phase::step})
    EXPECT_TRUE(collectives(sch, CollectiveKind::all_gather, ph).empty());
  for (const Op& op : sch.ops)
    EXPECT_FALSE(op.kind == OpKind::alloc && (op.mem.detail == "gathered" || op.mem.detail == "prefetch")) << op.name;
  EXPECT_FALSE(collectives(sch, CollectiveKind::reduce_scatter, Phase::backward).empty());
}

// bf16_optimizer.py get_grads_for_reduction: BF16_Optimizer gives the engine's fallback its fp32 flat gradient buffer,
// one tensor, so the whole model is all-reduced in one call (in communication_data_type, bf16 by default) however
// large it is (the record: Llama 1.3B at stage 0, one all-reduce of 2.43 GB).
TEST(DeepSpeedCalls, UnderDeepSpeedStage0Bf16AllReducesTheWholeFlatGradientInOneCall) {
  Scenario s = test::scenario(test::llama2_7b(), 0, 1, 8);
  s.runtime = RuntimeKind::deepspeed;
  const Plan p = make_plan(s);
  ASSERT_EQ(p.buckets.size(), 1u);
  const Schedule sch = make_schedule(s, p);
  const auto ar = collectives(sch, CollectiveKind::all_reduce, Phase::backward);
  ASSERT_EQ(ar.size(), 1u);
  EXPECT_EQ(ar[0]->collective.bytes, 2 * p.params);
  EXPECT_EQ(ar[0]->collective.dtype, DType::bf16);
}
