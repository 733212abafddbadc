#include "sim/plan/schedule_builder.hpp"

#include <tuple>
#include <gtest/gtest.h>

#include <chrono>
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "sim/plan/attention_flops.hpp"
#include "sim/plan/param_swap_in.hpp"
#include "sim/plan/test_scenarios.hpp"
#include "sim/schedule/schedule_json.hpp"

using namespace zsim;

namespace {

Schedule build(const Scenario& s, int steps = 1) { return make_schedule(s, make_plan(s), steps); }

std::vector<const Op*> ops_where(const Schedule& s, const std::function<bool(const Op&)>& pred) {
  std::vector<const Op*> out;
  for (const Op& op : s.ops)
    if (pred(op)) out.push_back(&op);
  return out;
}
bool is_collective(const Op& op, CollectiveKind k) { return op.kind == OpKind::collective && op.collective.what == k; }
const std::string& group_of(const Schedule& s, const Op& op) { return s.groups[op.collective.group].name; }


}  // namespace

TEST(ScheduleBuilder, EveryConfigurationPassesCheckSchedule) {
  for (int stage = 0; stage <= 3; ++stage)
    for (bool overlap : {false, true})
      for (int accum : {1, 3})
        for (Checkpointing ck : {Checkpointing::none, Checkpointing::full})
          for (OffloadDevice off : {OffloadDevice::none, OffloadDevice::cpu, OffloadDevice::nvme}) {
            Scenario s = test::scenario(test::small_llama(3), stage, 2, 4);
            s.zero.overlap_comm = overlap;
            s.training.grad_accum = accum;
            s.training.activation_checkpointing = ck;
            s.zero.offload_optimizer.device = off;
            s.zero.offload_param.device = stage == 3 ? off : OffloadDevice::none;
            s.zero.reduce_bucket_size = 1'000'000;
            s.zero.stage3_prefetch_bucket_size = 3'000'000;
            s.zero.sub_group_size = 2'000'000;
            if (stage == 3) {
              s.zero.zero_quantized_weights = s.zero.zero_quantized_gradients = true;
              s.zero.zero_hpz_partition_size = 4;
              s.zero.zeropp_loco_param.enabled = accum == 3;
              s.zero.stage3_allgather_sequential = overlap;
            }
            const Schedule sch = build(s, 2);
            EXPECT_NO_THROW(check_schedule(sch)) << "stage " << stage << " overlap " << overlap << " accum " << accum;
          }
}

TEST(ScheduleBuilder, MetaDescribesTheRun) {
  Scenario s = test::scenario(test::small_llama(), 3, 2, 8);
  s.training.grad_accum = 4;
  const Schedule sch = build(s, 3);
  EXPECT_EQ(sch.meta.world_size, 16);
  EXPECT_EQ(sch.meta.nodes, 2);
  EXPECT_EQ(sch.meta.gpus_per_node, 8);
  EXPECT_EQ(sch.meta.steps, 3);
  EXPECT_EQ(sch.meta.params, make_plan(s).params);
  EXPECT_EQ(sch.meta.tokens_per_step, 1 * 1024 * 4 * 16);
}

TEST(ScheduleBuilder, Stage3GathersEachUnitForForwardAndBackward) {
  Scenario s = test::scenario(test::small_llama(4), 3, 1, 8);
  s.training.activation_checkpointing = Checkpointing::none;
  s.zero.stage3_prefetch_bucket_size = 0;
  s.zero.stage3_max_reuse_distance = 0;
  const Plan p = make_plan(s);
  const Schedule sch = make_schedule(s, p);
  size_t gathered_units = 0;
  for (const auto& u : p.units) gathered_units += u.gathered > 0;
  const auto fwd = ops_where(sch, [](const Op& op) {
    return is_collective(op, CollectiveKind::all_gather) && op.phase == Phase::forward;
  });
  const auto bwd = ops_where(sch, [](const Op& op) {
    return is_collective(op, CollectiveKind::all_gather) && op.phase == Phase::backward;
  });
  EXPECT_EQ(fwd.size(), gathered_units);
  EXPECT_EQ(bwd.size(), gathered_units);
}

// With checkpointing and no reuse, every layer unit is gathered a third time for the recompute; with a
// reuse distance above a layer's size the recompute's gathers serve the backward too.
TEST(ScheduleBuilder, RecomputeRegathersOnlyWithoutReuse) {
  Scenario s = test::scenario(test::small_llama(4), 3, 1, 8);
  s.runtime = RuntimeKind::zrun;  // zrun's trace (DeepSpeed's coordinator: deepspeed_fetch_test.cpp)
  s.zero.stage3_prefetch_bucket_size = 0;
  auto gathers = [&](Elements reuse) {
    s.zero.stage3_max_reuse_distance = reuse;
    return ops_where(build(s), [](const Op& op) { return is_collective(op, CollectiveKind::all_gather); }).size();
  };
  const Plan p = make_plan(s);
  size_t units = 0, layer_units = 0;
  for (const auto& u : p.units) {
    units += u.gathered > 0;
    layer_units += u.gathered > 0 && u.layer >= 0;
  }
  EXPECT_EQ(gathers(0), 2 * units + layer_units);
  EXPECT_LE(gathers(2 * p.shapes.layer.params()), 2 * units);  // reuse may also skip some backward gathers
}

// The forward of a unit waits for the op that completes its fetch: its all-gather (one tensor) or its
// copy out of a coalesced call's flat buffer.
TEST(ScheduleBuilder, ForwardComputeWaitsForItsGather) {
  for (Elements prefetch : {Elements{0}, Elements{3'000'000}}) {
    Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
    s.zero.stage3_prefetch_bucket_size = prefetch;
    const Schedule sch = build(s);
    for (const Op& op : sch.ops) {
      if (op.kind != OpKind::compute || op.compute.what != ComputeKind::forward) continue;
      bool waits_for_gather = false;
      for (OpId d : op.deps) {
        const Op& dep = sch.ops[d];
        waits_for_gather |= is_collective(dep, CollectiveKind::all_gather) ||
                            (dep.kind == OpKind::copy && dep.copy.what == CopyKind::d2d && dep.name == op.name + ".copy_out");
      }
      EXPECT_TRUE(waits_for_gather) << op.name << " prefetch " << prefetch;
    }
  }
}

// A gather issued at trace step i waits (through its first op) for the compute of step i-1, so the comm
// stream cannot run further ahead of compute than the prefetch window.
TEST(ScheduleBuilder, GathersAreIssuedAfterThePreviousStepsCompute) {
  Scenario s = test::scenario(test::small_llama(3), 3, 1, 8);
  s.zero.stage3_prefetch_bucket_size = 600'000;
  const Schedule sch = build(s);
  OpId last_compute = -1;
  int checked = 0;
  for (const Op& op : sch.ops) {
    if (op.kind == OpKind::compute && sch.streams[op.stream] == "compute") last_compute = op.id;
    if (op.kind == OpKind::alloc && (op.mem.detail == "gathered" || op.mem.detail == "prefetch") &&
        op.name.rfind("alloc.gathered.", 0) == 0 && last_compute >= 0) {
      EXPECT_NE(std::find(op.deps.begin(), op.deps.end(), last_compute), op.deps.end()) << op.name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 10);
}

TEST(ScheduleBuilder, PersistentParamsAreNotGathered) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
  const Elements all = make_plan(s).params;
  s.zero.stage3_param_persistence_threshold = 1'000'000'000;  // everything persists
  const Schedule sch = build(s);
  // Never fetched in forward or backward; only stage3.py _post_step re-gathers each one from its updated partition.
  EXPECT_TRUE(ops_where(sch, [](const Op& op) {
                return is_collective(op, CollectiveKind::all_gather) && op.phase != Phase::step;
              }).empty());
  size_t tensors = 0;
  for (const auto& u : make_plan(s).units) tensors += u.tensors.size();
  EXPECT_EQ(ops_where(sch, [](const Op& op) {
              return is_collective(op, CollectiveKind::all_gather) && op.phase == Phase::step;
            }).size(),
            tensors * static_cast<size_t>(sch.meta.steps));
  const auto persistent = ops_where(sch, [](const Op& op) { return op.kind == OpKind::alloc && op.mem.detail == "persistent"; });
  ASSERT_EQ(persistent.size(), 1u);
  EXPECT_EQ(persistent[0]->mem.bytes, 2 * all);
}

TEST(ScheduleBuilder, OverlapCommReducesOnItsOwnStream) {
  Scenario s = test::scenario(test::small_llama(2), 2, 1, 8);
  s.zero.reduce_bucket_size = 500'000;
  s.zero.overlap_comm = true;
  const Schedule over = build(s);
  const auto reductions = ops_where(over, [](const Op& o) {
    return o.kind == OpKind::collective && o.phase == Phase::backward;
  });
  ASSERT_FALSE(reductions.empty());
  for (const Op* op : reductions) EXPECT_EQ(over.streams[op->stream], "comm_rs");
  s.zero.overlap_comm = false;
  const Schedule serial = build(s);
  // Serialised: the backward compute after a reduction waits for it.
  int waits = 0;
  for (const Op& op : serial.ops)
    if (op.kind == OpKind::compute && op.phase == Phase::backward)
      for (OpId d : op.deps) waits += serial.ops[d].kind != OpKind::compute && serial.ops[d].phase == Phase::backward &&
                                      serial.streams[serial.ops[d].stream] == "comm";
  EXPECT_GT(waits, 0);
}

// Buckets fill and reduce in order; with overlap_comm the next bucket fills while the previous one is
// reduced (two buffers live), without it one at a time.
TEST(ScheduleBuilder, OverlapCommDoubleBuffersGradientBuckets) {
  for (bool overlap : {false, true}) {
    Scenario s = test::scenario(test::small_llama(3), 3, 1, 8);
    s.runtime = RuntimeKind::zrun;  // a buffer per bucket (DeepSpeed's stage 3 fills one flat buffer for the run)
    s.zero.overlap_comm = overlap;
    s.zero.reduce_bucket_size = make_plan(s).units[1].params / 3;  // several buckets per layer
    const Schedule sch = build(s);
    int live = 0, most = 0;
    for (const Op& op : sch.ops) {
      if (op.mem.detail != "bucket") continue;
      live += op.kind == OpKind::alloc ? 1 : op.kind == OpKind::free ? -1 : 0;
      most = std::max(most, live);
    }
    EXPECT_EQ(live, 0);
    EXPECT_EQ(most, overlap ? 2 : 1) << "overlap " << overlap;
  }
}

TEST(ScheduleBuilder, BackwardIsCutWhereBucketsFill) {
  Scenario s = test::scenario(test::small_llama(2), 2, 1, 8);
  const Plan whole = make_plan(s);
  s.zero.reduce_bucket_size = whole.units[1].params / 3;
  const Schedule sch = build(s);
  double flops = 0;
  int parts = 0;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.compute.what == ComputeKind::backward && op.layer == 1) {
      flops += op.compute.flops;
      ++parts;
    }
  EXPECT_GE(parts, 3);
  const Schedule one = build(test::scenario(test::small_llama(2), 2, 1, 8));
  double one_flops = 0;
  for (const Op& op : one.ops)
    if (op.kind == OpKind::compute && op.compute.what == ComputeKind::backward && op.layer == 1) one_flops += op.compute.flops;
  EXPECT_DOUBLE_EQ(flops, one_flops);
}

TEST(ScheduleBuilder, Stages0And1ReduceOnlyOnTheLastMicroStepStage2EveryMicroStep) {
  for (int stage : {0, 1, 2}) {
    Scenario s = test::scenario(test::small_llama(2), stage, 1, 8);
    s.training.grad_accum = 4;
    const Schedule sch = build(s);
    const auto red = ops_where(sch, [](const Op& op) {
      return op.kind == OpKind::collective && op.phase == Phase::backward;
    });
    const Plan p = make_plan(s);
    EXPECT_EQ(red.size(), p.buckets.size() * (stage == 2 ? 4 : 1)) << "stage " << stage;
    for (const Op* op : red)
      if (stage < 2) EXPECT_EQ(op->micro_step, 3);
  }
}

// Stage 0 all-reduces; stages 1-2 all-reduce each bucket (DeepSpeed's use_multi_rank_bucket_allreduce
// default) and all-gather the parameters after the step; stage 3 reduce-scatters.
TEST(ScheduleBuilder, Stage0AllReducesStages1And2AllReduceBucketsThenAllGather) {
  Scenario zero = test::scenario(test::small_llama(2), 0, 1, 8);
  zero.runtime = RuntimeKind::zrun;  // DeepSpeed's BF16_Optimizer also all-gathers at stage 0 (test below)
  const Schedule s0 = build(zero);
  EXPECT_FALSE(ops_where(s0, [](const Op& op) { return is_collective(op, CollectiveKind::all_reduce); }).empty());
  EXPECT_TRUE(ops_where(s0, [](const Op& op) { return is_collective(op, CollectiveKind::all_gather); }).empty());
  const Schedule s2 = build(test::scenario(test::small_llama(2), 2, 1, 8));
  EXPECT_FALSE(ops_where(s2, [](const Op& op) { return is_collective(op, CollectiveKind::all_reduce); }).empty());
  EXPECT_TRUE(ops_where(s2, [](const Op& op) { return is_collective(op, CollectiveKind::reduce_scatter); }).empty());
  const Schedule s3 = build(test::scenario(test::small_llama(2), 3, 1, 8));
  EXPECT_FALSE(ops_where(s3, [](const Op& op) { return is_collective(op, CollectiveKind::reduce_scatter); }).empty());
  const auto ag = ops_where(s2, [](const Op& op) { return is_collective(op, CollectiveKind::all_gather); });
  ASSERT_FALSE(ag.empty());
  for (const Op* op : ag) EXPECT_EQ(op->phase, Phase::step);
}

TEST(ScheduleBuilder, HpzBackwardGathersStayInsideTheHpzGroup) {
  Scenario s = test::scenario(test::small_llama(2), 3, 2, 8);
  s.zero.zero_hpz_partition_size = 8;
  const Schedule sch = build(s);
  for (const Op* op : ops_where(sch, [](const Op& o) { return is_collective(o, CollectiveKind::all_gather); }))
    EXPECT_EQ(group_of(sch, *op), op->phase == Phase::backward ? "hpz" : "world") << op->name;
  const auto hpz = ops_where(sch, [](const Op& op) { return op.kind == OpKind::alloc && op.mem.detail == "hpz"; });
  Bytes secondary = 0;
  for (const Op* op : hpz) secondary += op->mem.bytes;
  EXPECT_EQ(secondary, 2 * make_plan(s).params / 8);  // 16-bit params / hpZ size
}

// DeepSpeed's all_gather_coalesced with quantize: the partition is quantized, its int8 values and its
// fp32 scales are all-gathered by two collectives, and the wait dequantizes.
TEST(ScheduleBuilder, QwzGathersInt8AndScalesBetweenQuantizeAndDequantize) {
  Scenario s = test::scenario(test::small_llama(2), 3, 2, 8);
  s.zero.zero_quantized_weights = true;
  const Schedule sch = build(s);
  const auto ag = ops_where(sch, [](const Op& o) { return is_collective(o, CollectiveKind::all_gather); });
  ASSERT_FALSE(ag.empty());
  ASSERT_EQ(ag.size() % 2, 0u);
  for (size_t i = 0; i < ag.size(); i += 2) {
    const Op& data = *ag[i];
    const Op& scales = *ag[i + 1];
    EXPECT_EQ(data.collective.dtype, DType::int8);
    EXPECT_EQ(data.collective.scale_bytes, 0);
    EXPECT_EQ(scales.collective.dtype, DType::fp32);
    EXPECT_EQ(scales.collective.scale_bytes, scales.collective.bytes);
    EXPECT_GT(scales.collective.bytes, 0);
    EXPECT_EQ(sch.ops[data.deps[0]].compute.what, ComputeKind::quantize);
    EXPECT_EQ(scales.deps, data.deps);
    bool dequantized = false;
    for (const Op& op : sch.ops)
      if (op.kind == OpKind::compute && op.compute.what == ComputeKind::dequantize)
        dequantized |= std::find(op.deps.begin(), op.deps.end(), scales.id) != op.deps.end();
    EXPECT_TRUE(dequantized) << scales.name;
  }
}

TEST(ScheduleBuilder, QgzReducesIntraNodeThenInterNodeInInt4) {
  Scenario s = test::scenario(test::small_llama(2), 3, 4, 8);
  s.runtime = RuntimeKind::zrun;  // zrun's peer-major bucket: one all-to-all a hop (DeepSpeed's: deepspeed_calls_test)
  s.zero.zero_quantized_gradients = true;
  const Schedule sch = build(s);
  const auto a2a = ops_where(sch, [](const Op& o) { return is_collective(o, CollectiveKind::all_to_all); });
  ASSERT_FALSE(a2a.empty());
  ASSERT_EQ(a2a.size() % 2, 0u);
  for (size_t i = 0; i < a2a.size(); i += 2) {
    EXPECT_EQ(group_of(sch, *a2a[i]), "intra_node");
    EXPECT_EQ(group_of(sch, *a2a[i + 1]), "inter_node");
    EXPECT_EQ(a2a[i]->collective.dtype, DType::int4);
    EXPECT_EQ(sch.ops[a2a[i + 1]->deps[0]].compute.what, ComputeKind::dequant_reduce);
  }
}

// DeepSpeed's all_to_all_quant_reduce runs swizzle_quant, quantized_reduction and dequantize tensor by tensor
// (runtime/comm/coalesced_collectives.py), as zrun's executor runs the bucket's ops: a kernel per quantized tensor in
// each; LoCo adds its error's dequantize and quantize back around the quantize and the requantizing dequant-reduce.
TEST(ScheduleBuilder, QgzOpsLaunchAKernelPerQuantizedTensor) {
  for (const bool loco : {false, true}) {
    Scenario s = test::scenario(test::small_llama(2), 3, 4, 8);
    s.zero.zero_quantized_gradients = true;
    s.zero.zeropp_loco_param.enabled = loco;
    const Schedule sch = build(s);
    int checked = 0, reduces = 0;
    for (const Op& q : sch.ops) {
      if (q.kind != OpKind::compute || q.compute.what != ComputeKind::quantize || q.compute.dtype != DType::int4) continue;
      std::set<std::pair<int, int>> tensors;
      for (const BufferUse& u : q.uses)
        if (u.role == Role::input) tensors.insert({u.unit, u.tensor});
      ASSERT_FALSE(tensors.empty()) << q.name;
      const int t = static_cast<int>(tensors.size());
      EXPECT_EQ(q.compute.kernel_launches, t * (loco ? 3 : 1)) << q.name;
      const std::string bucket = q.name.substr(0, q.name.size() - std::string(".quantize").size());
      for (const Op& d : sch.ops) {
        if (d.name == bucket + ".dequant_reduce.intra") {
          EXPECT_EQ(d.compute.kernel_launches, t * (loco ? 3 : 1));
          ++reduces;
        }
        if (d.name == bucket + ".dequant_reduce.inter") {
          EXPECT_EQ(d.compute.kernel_launches, t);
          ++reduces;
        }
      }
      ++checked;
    }
    EXPECT_GT(checked, 0);
    EXPECT_EQ(reduces, 2 * checked);
  }
}

// qwZ: CUDAQuantizer's quantize is one kernel over the partition; the dequantize one over every rank's partition, or
// one per rank where a partition is not whole blocks of its scales (zrun's executor).
TEST(ScheduleBuilder, QwzQuantizeIsOneKernelAndDequantizeOneOrOnePerRank) {
  Scenario s = test::scenario(test::small_llama(2), 3, 2, 8);
  s.zero.zero_quantized_weights = true;
  const Schedule sch = build(s);
  int quantize = 0, dequantize = 0;
  for (const Op& op : sch.ops) {
    if (op.kind != OpKind::compute) continue;
    if (op.compute.what == ComputeKind::quantize) {
      EXPECT_EQ(op.compute.kernel_launches, 1) << op.name;
      ++quantize;
    }
    if (op.compute.what == ComputeKind::dequantize) {
      EXPECT_TRUE(op.compute.kernel_launches == 1 || op.compute.kernel_launches == 2) << op.name;
      ++dequantize;
    }
  }
  EXPECT_GT(quantize, 0);
  EXPECT_GT(dequantize, 0);
}

TEST(ScheduleBuilder, LocoKeepsInt8ErrorBuffersForTheWholeRun) {
  Scenario s = test::scenario(test::small_llama(2), 3, 2, 8);
  s.zero.zero_quantized_gradients = true;
  s.zero.zeropp_loco_param.enabled = true;
  const Schedule sch = build(s);
  const auto loco = ops_where(sch, [](const Op& op) { return op.mem.detail == "loco_error"; });
  ASSERT_EQ(loco.size(), 1u);  // allocated once, never freed
  EXPECT_EQ(loco[0]->phase, Phase::init);
  // About one byte per matrix parameter (intra error) + 1/8 of it (inter error), plus scales.
  const Plan p = make_plan(s);
  EXPECT_GT(loco[0]->mem.bytes, p.params);
  EXPECT_LT(loco[0]->mem.bytes, p.params * 9 / 8 + p.params / 100);
}

TEST(ScheduleBuilder, SequentialAllgatherIssuesOneCollectivePerTensor) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
  s.zero.stage3_prefetch_bucket_size = 0;
  s.zero.stage3_max_reuse_distance = 0;
  s.zero.stage3_allgather_sequential = true;
  const Schedule sch = build(s);
  const auto fwd = ops_where(sch, [](const Op& o) {
    return is_collective(o, CollectiveKind::all_gather) && o.phase == Phase::forward;
  });
  const Plan p = make_plan(s);
  size_t tensors = 0;
  for (const auto& u : p.units) tensors += u.gathered_tensors.size();
  EXPECT_EQ(fwd.size(), tensors);
  EXPECT_TRUE(ops_where(sch, [](const Op& o) { return o.kind == OpKind::alloc && o.name.rfind("alloc.flat.", 0) == 0; }).empty());
}

TEST(ScheduleBuilder, CpuOffloadCopiesGradsDownRunsAdamOnCpuAndCopiesParamsUp) {
  Scenario s = test::scenario(test::small_llama(2), 2, 1, 8);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  const Schedule sch = build(s);
  const auto adam = ops_where(sch, [](const Op& o) {
    return o.kind == OpKind::compute && o.compute.what == ComputeKind::optimizer && o.name.ends_with(".cpu_adam");
  });
  ASSERT_EQ(adam.size(), 1u);
  EXPECT_EQ(adam[0]->compute.device, Device::cpu);
  EXPECT_EQ(sch.streams[adam[0]->stream], "cpu");
  EXPECT_EQ(adam[0]->compute.elements, make_plan(s).optimizer_partition);
  EXPECT_FALSE(ops_where(sch, [](const Op& o) { return o.kind == OpKind::copy && o.copy.what == CopyKind::d2h; }).empty());
  EXPECT_FALSE(ops_where(sch, [](const Op& o) { return o.kind == OpKind::copy && o.copy.what == CopyKind::h2d; }).empty());
}

// Under DeepSpeed each CPU Adam follows unscale_and_clip_grads' `grad.data.mul_(1. / combined_scale)` over the same
// fp32 gradients in host memory (stage_1_and_2.py, stage3.py): a CPU op reading and writing 4 bytes an element.
// zrun's schedule has none.
TEST(ScheduleBuilder, DeepSpeedUnscalesTheFp32GradientsOnTheCpuBeforeEachCpuAdam) {
  for (int stage : {2, 3}) {
    Scenario s = test::scenario(test::small_llama(2), stage, 1, 1);
    s.zero.offload_optimizer.device = OffloadDevice::cpu;
    for (RuntimeKind runtime : {RuntimeKind::deepspeed, RuntimeKind::zrun}) {
      s.runtime = runtime;
      const Schedule sch = build(s);
      const auto unscale = ops_where(sch, [](const Op& o) { return o.name.ends_with(".unscale"); });
      const auto adam = ops_where(sch, [](const Op& o) { return o.name.ends_with(".cpu_adam"); });
      ASSERT_FALSE(adam.empty());
      if (runtime == RuntimeKind::zrun) {
        EXPECT_TRUE(unscale.empty());
        continue;
      }
      ASSERT_EQ(unscale.size(), adam.size()) << "stage " << stage;
      for (size_t i = 0; i < adam.size(); ++i) {
        const Op& u = *unscale[i];
        EXPECT_EQ(u.compute.device, Device::cpu);
        EXPECT_EQ(u.compute.hbm_bytes, 8 * u.compute.elements);
        EXPECT_EQ(u.compute.elements, adam[i]->compute.elements);
        EXPECT_NE(std::find(adam[i]->deps.begin(), adam[i]->deps.end(), u.id), adam[i]->deps.end());
        ASSERT_EQ(u.uses.size(), 1u);
        EXPECT_EQ(u.uses[0].role, Role::grad);
        EXPECT_EQ(u.uses[0].access, Access::read_write);
        EXPECT_EQ(u.uses[0].alloc, adam[i]->uses[0].alloc);  // Adam's gradients
        EXPECT_EQ(u.uses[0].offset, adam[i]->uses[0].offset);
      }
    }
  }
}

// Stage 3 with the optimizer on NVMe: each sub-group's step reads its state (12 bytes per element) and the fp32
// gradients the backward swapped out (4), and the backward writes each gradient element once per step.
TEST(ScheduleBuilder, NvmeOffloadSwapsOptimizerStateAndGradientsPerSubGroup) {
  Scenario s = test::scenario(test::small_llama(4), 3, 1, 8);
  s.zero.offload_optimizer.device = OffloadDevice::nvme;
  s.zero.sub_group_size = 200'000;
  const Schedule sch = build(s);
  const Plan p = make_plan(s);
  auto bytes_of = [&](CopyKind kind, Phase phase) {
    std::vector<Bytes> out;
    for (const Op* op : ops_where(sch, [&](const Op& o) {
           return o.kind == OpKind::copy && o.copy.what == kind && o.phase == phase;
         }))
      out.push_back(op->copy.bytes);
    return out;
  };
  const std::vector<Bytes> reads = bytes_of(CopyKind::nvme_read, Phase::step);
  ASSERT_EQ(reads.size(), 2 * p.sub_groups.size());
  Bytes total = 0;
  for (Bytes b : reads) total += b;
  EXPECT_EQ(total, (12 + 4) * p.optimizer_partition);
  Bytes written = 0;
  for (Bytes b : bytes_of(CopyKind::nvme_write, Phase::backward)) written += b;
  EXPECT_EQ(written, 4 * p.optimizer_partition);
}

// DeepSpeed's ZeRO-1/2 optimizer (stage_1_and_2.py) sets `cpu_offload` for any offload_optimizer device: with nvme
// the state stays in CPU memory and the step is offload to the CPU's op for op, with a warning saying so.
TEST(ScheduleBuilder, Zero12WithTheOptimizerOnNvmeRunsTheCpuOffloadSchedule) {
  for (int stage : {1, 2}) {
    Scenario s = test::scenario(test::small_llama(2), stage, 1, 8);
    s.zero.offload_optimizer.device = OffloadDevice::cpu;
    const Schedule cpu = build(s);
    s.zero.offload_optimizer.device = OffloadDevice::nvme;
    const Plan p = make_plan(s);
    EXPECT_EQ(p.optimizer_device, OffloadDevice::cpu) << "stage " << stage;
    EXPECT_TRUE(std::any_of(p.warnings.begin(), p.warnings.end(),
                            [](const std::string& w) { return w.find("offload_optimizer.device nvme") != std::string::npos; }))
        << "stage " << stage;
    const Schedule nvme = build(s);
    ASSERT_EQ(nvme.ops.size(), cpu.ops.size()) << "stage " << stage;
    for (size_t i = 0; i < nvme.ops.size(); ++i) {
      EXPECT_EQ(nvme.ops[i].name, cpu.ops[i].name) << "stage " << stage;
      if (nvme.ops[i].kind == OpKind::alloc) EXPECT_NE(nvme.ops[i].mem.tier, Tier::nvme) << nvme.ops[i].name;
    }
  }
}

// The optimizer swapper's pinned pool (optimizer_utils.py OptimizerSwapper: SwapBufferManager of
// offload_optimizer.buffer_count buffers of the largest sub-group's io-aligned fp32 elements), allocated once at init:
// every sub-group's state and gradients are read into it, after the previous sub-group's state has been written out
// of it; the backward stages its gradient writes through it, a chunk after the writes out of the bytes it takes. No
// other swap buffer is allocated. Too few buffers for a sub-group's swap-in is refused, naming the key.
TEST(ScheduleBuilder, OptimizerOnNvmeSwapsThroughTheSwappersPinnedPool) {
  Scenario s = test::scenario(test::small_llama(4), 3, 1, 8);
  s.zero.offload_optimizer.device = OffloadDevice::nvme;
  s.zero.sub_group_size = 200'000;
  const Plan p = make_plan(s);
  ASSERT_GE(p.sub_groups.size(), 8u);  // the pool holds 4 sub-groups' worth: the backward goes round it
  const Schedule sch = make_schedule(s, p, 2);
  const Bytes buffer = 4 * swap_io_aligned(*std::max_element(p.sub_groups.begin(), p.sub_groups.end()), 4);
  const auto pools = ops_where(sch, [](const Op& o) { return o.kind == OpKind::alloc && o.mem.buffer == "opt_swap.pool"; });
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0]->phase, Phase::init);
  EXPECT_EQ(pools[0]->mem.bytes, 4 * buffer);
  const OpId pool = pools[0]->id;
  EXPECT_TRUE(ops_where(sch, [&](const Op& o) {
                return o.kind == OpKind::alloc && o.id != pool && o.mem.detail == "nvme_swap";
              }).empty());
  // Whether `a` waits, directly or through others, for `b`.
  auto waits_for = [&](OpId a, OpId b) {
    std::vector<OpId> todo{a};
    std::set<OpId> seen;
    while (!todo.empty()) {
      const OpId x = todo.back();
      todo.pop_back();
      if (x == b) return true;
      if (x < b || !seen.insert(x).second) continue;
      for (OpId d : sch.ops[x].deps) todo.push_back(d);
    }
    return false;
  };
  OpId last_state_write = -1;
  std::vector<std::pair<std::pair<Bytes, Bytes>, OpId>> staged;  // pool bytes written out by the backward, and by whom
  int state_reads = 0, stagings = 0;
  for (const Op& op : sch.ops) {
    if (op.kind != OpKind::copy || op.uses.size() != 2) continue;
    const BufferUse &in = op.uses[0], &out = op.uses[1];
    if (op.copy.what == CopyKind::nvme_read && out.alloc == pool && out.offset == 0) {  // a sub-group's state
      if (last_state_write >= 0) EXPECT_TRUE(waits_for(op.id, last_state_write)) << op.name;
      ++state_reads;
    }
    if (op.copy.what == CopyKind::nvme_write && in.alloc == pool && op.phase == Phase::step) last_state_write = op.id;
    if (op.copy.what == CopyKind::d2h && out.alloc == pool) {  // a gradient chunk staged in the backward
      EXPECT_LE(out.offset + out.bytes, 4 * buffer) << op.name;
      for (const auto& [range, w] : staged)
        if (range.first < out.offset + out.bytes && out.offset < range.second)
          EXPECT_TRUE(waits_for(op.id, w)) << op.name << " overwrites staged bytes not yet written out";
      ++stagings;
    }
    if (op.copy.what == CopyKind::nvme_write && in.alloc == pool && op.phase == Phase::backward)
      staged.push_back({{in.offset, in.offset + in.bytes}, op.id});
  }
  EXPECT_EQ(state_reads, 2 * static_cast<int>(p.sub_groups.size()));
  EXPECT_GT(stagings, 0);
  s.zero.offload_optimizer.buffer_count = 3;
  try {
    make_plan(s);
    FAIL() << "three buffers planned";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("offload_optimizer.buffer_count 3"), std::string::npos) << e.what();
  }
}

// Bytes rank 0 moves per step by copies of `kind` in a phase (the backward pass unless given).
Bytes backward_copy_bytes(const Schedule& sch, CopyKind kind, Phase phase = Phase::backward) {
  Bytes b = 0;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::copy && op.copy.what == kind && op.phase == phase && op.copy.rank <= 0)
      b += op.copy.bytes;
  return b;
}

// Stage 3 with the optimizer on the CPU, as stage3.py partition_grads moves a rank's gradient partition (E
// elements, 16-bit in the host's grad_partitions_flat_buffer): every micro-step copies the partition down and up
// once in 16 bits (micro-step 0: down, then `.to(device)` back up; later: up, add, down), and the boundary copies it
// down once more in fp32, converted on the GPU.
// At the boundary the partition goes down once more into the CPU optimizer's fp32 gradients: zrun converts it on the
// GPU first (fp32 crosses); DeepSpeed 0.14.5's blocking `fp32_grad_tensor.copy_(grad_buffer)` converts on the CPU
// (16 bits cross).
TEST(ScheduleBuilder, Stage3OptimizerOffloadMovesThePartitionDownAndUpIn16BitsEachMicroStepAndDownOnceMore) {
  for (RuntimeKind runtime : {RuntimeKind::zrun, RuntimeKind::deepspeed})
    for (int accum : {1, 2, 4}) {
      Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
      s.runtime = runtime;
      s.zero.offload_optimizer.device = OffloadDevice::cpu;
      s.training.grad_accum = accum;
      const Plan p = make_plan(s);
      const Schedule sch = make_schedule(s, p, 1);
      const Bytes E = p.optimizer_partition, e = p.elem_bytes;
      const Bytes boundary = runtime == RuntimeKind::zrun ? 4 * E : e * E;
      EXPECT_EQ(backward_copy_bytes(sch, CopyKind::d2h), accum * e * E + boundary) << "grad_accum " << accum;
      EXPECT_EQ(backward_copy_bytes(sch, CopyKind::h2d), accum * e * E) << "grad_accum " << accum;
    }
}

// DeepSpeed 0.14.5's partition_grads with the optimizer on the CPU: one GPU copy of a parameter's gradient partition
// at a time, and at the boundary its float64 copy in slices of at most 250M elements (_constant_buffered_norm2); no
// fp32 copy on the GPU. The most live in these buffers is the widest partition's 2 + 8 bytes an element.
TEST(ScheduleBuilder, Stage3OptimizerOffloadHoldsOneGradientCopyAndItsFloat64NormSliceAtATime) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 1);
  s.runtime = RuntimeKind::deepspeed;
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  const Plan p = make_plan(s);
  const Schedule sch = make_schedule(s, p, 1);
  Elements widest = 0;
  for (const auto& u : p.units)
    for (const auto& t : u.tensors) widest = std::max(widest, t.numel());
  ASSERT_LT(widest, 250'000'000);
  std::map<std::string, Bytes> live;  // GPU bytes live per buffer detail, replayed in program order
  std::map<std::string, const MemOp*> open;
  Bytes most = 0;
  for (const Op& op : sch.ops) {
    if ((op.kind != OpKind::alloc && op.kind != OpKind::free) || op.mem.tier != Tier::gpu) continue;
    if (op.kind == OpKind::alloc) open[op.mem.buffer] = &op.mem;
    const MemOp& m = op.kind == OpKind::alloc ? op.mem : *open.at(op.mem.buffer);
    live[m.detail] += op.kind == OpKind::alloc ? m.bytes : -m.bytes;
    EXPECT_EQ(live["offload_cast"], 0);
    EXPECT_LE(live["grad_buffer"], p.elem_bytes * widest);
    most = std::max(most, live["grad_buffer"] + live["grad_norm"]);
  }
  EXPECT_EQ(most, (p.elem_bytes + 8) * widest);
}

// ZeRO-2 with cpu_offload and one micro-step (stage_1_and_2.py copy_grads_in_partition at the boundary): each
// rank's partition goes down once, in fp32, after a cast on the GPU; nothing comes back up in the backward.
TEST(ScheduleBuilder, Zero2CpuOffloadCopiesThePartitionDownOnceInFp32) {
  Scenario s = test::scenario(test::small_llama(2), 2, 1, 1);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  const Plan p = make_plan(s);
  const Schedule sch = make_schedule(s, p, 1);
  EXPECT_EQ(backward_copy_bytes(sch, CopyKind::d2h), 4 * p.params);
  EXPECT_EQ(backward_copy_bytes(sch, CopyKind::h2d), 0);
  Bytes cast = 0;
  for (const Op* op : ops_where(sch, [](const Op& o) { return o.kind == OpKind::copy && o.copy.cast; }))
    if (op->phase == Phase::backward) cast += op->copy.bytes;
  EXPECT_EQ(cast, 4 * p.params);
}

// DeepSpeed 0.14.5's ZeRO-1/2 step with the optimizer on the CPU (stage_1_and_2.py step():
// `bit16.copy_(fp32_partition.to(device))`): the fp32 master goes up whole into a GPU tensor that lives until a
// cast writes the 16-bit partition; no 16-bit host buffer. zrun's schedule keeps the pinned 16-bit buffer.
TEST(ScheduleBuilder, DeepSpeedZero2CpuOffloadStepCopiesTheFp32MasterUpAndCastsItOnTheGpu) {
  Scenario s = test::scenario(test::small_llama(2), 2, 1, 1);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  for (RuntimeKind runtime : {RuntimeKind::deepspeed, RuntimeKind::zrun}) {
    s.runtime = runtime;
    const Plan p = make_plan(s);
    const Schedule sch = make_schedule(s, p, 1);
    const bool ds = runtime == RuntimeKind::deepspeed;
    EXPECT_EQ(backward_copy_bytes(sch, CopyKind::h2d, Phase::step), (ds ? 4 : p.elem_bytes) * p.params);
    Bytes step_cast = 0, fp32_up = 0;
    bool host16 = false;
    for (const Op& op : sch.ops) {
      if (op.kind == OpKind::copy && op.copy.cast && op.phase == Phase::step) {
        EXPECT_EQ(op.copy.cast_from, DType::fp32);
        EXPECT_EQ(op.copy.cast_to, p.dtype);
        step_cast += op.copy.bytes;
      }
      if (op.kind == OpKind::alloc && op.mem.tier == Tier::gpu && op.phase == Phase::step &&
          op.mem.detail == "param_h2d")
        fp32_up += op.mem.bytes;
      if (op.kind == OpKind::alloc && op.mem.buffer == "params16.cpu_offload") host16 = true;
    }
    EXPECT_EQ(step_cast, ds ? p.elem_bytes * p.params : 0);
    EXPECT_EQ(fp32_up, ds ? 4 * p.params : 0);
    EXPECT_EQ(host16, !ds);
  }
}

// Stage 3 with CPU offload: torch's copy_ across devices that changes the dtype converts on the CPU through a
// temporary CPU tensor, so under DeepSpeed those crossings are pageable (the step's fp32 master into the CPU's 16-bit
// partition; backward's 16-bit gradients into the fp32 buffer; the fp32 master into the GPU's 16-bit partition),
// whatever pin_memory says. zrun converts on the GPU: its copies stay pinned.
TEST(ScheduleBuilder, DeepSpeedStageThreeOffloadsConvertingCopiesArePageableZrunsPinned) {
  for (bool params_offloaded : {true, false}) {
    Scenario s = test::scenario(test::small_llama(2), 3, 1, 1);
    if (params_offloaded) s.zero.offload_param.device = OffloadDevice::cpu;
    else s.zero.offload_optimizer.device = OffloadDevice::cpu;
    s.zero.offload_param.pin_memory = s.zero.offload_optimizer.pin_memory = true;
    for (RuntimeKind runtime : {RuntimeKind::deepspeed, RuntimeKind::zrun}) {
      s.runtime = runtime;
      const Schedule sch = make_schedule(s, make_plan(s), 1);
      int converting = 0, pageable = 0;
      for (const Op& op : sch.ops) {
        if (op.kind != OpKind::copy || (op.copy.what != CopyKind::d2h && op.copy.what != CopyKind::h2d)) continue;
        const bool step_write_back = op.phase == Phase::step && (op.name.ends_with(".param_d2h") ||
                                                                 (!params_offloaded && op.name.ends_with(".h2d")));
        const bool grads_down = op.phase == Phase::backward && op.name.ends_with(".d2h");
        if (!step_write_back && !grads_down) continue;
        ++converting;
        pageable += !op.copy.pinned;
      }
      EXPECT_GT(converting, 0) << params_offloaded;
      EXPECT_EQ(pageable, runtime == RuntimeKind::deepspeed ? converting : 0) << params_offloaded;
    }
  }
}

// ZeRO-2 with cpu_offload over 3 micro-steps (async_accumulate_grad_in_cpu_via_gpu, whole tensors in 16 bits): the
// first micro-step copies each tensor down, the later ones bring it up and add it on the GPU, and the middle one
// copies the sum back down (the schedule's rule; DeepSpeed's current code skips that copy: schedule_builder.cpp).
TEST(ScheduleBuilder, Zero2CpuOffloadAccumulatesWholeTensorsThroughTheGpu) {
  Scenario s = test::scenario(test::small_llama(2), 2, 1, 1);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  s.training.grad_accum = 3;
  const Plan p = make_plan(s);
  const Schedule sch = make_schedule(s, p, 1);
  const Bytes e = p.elem_bytes;
  EXPECT_EQ(backward_copy_bytes(sch, CopyKind::d2h), 2 * e * p.params + 4 * p.params);
  EXPECT_EQ(backward_copy_bytes(sch, CopyKind::h2d), 2 * e * p.params);
}

// The d2d copies run as many kernels as DeepSpeed's code launches: stage 3's partition_grads a copy_ (add_ after the
// first micro-step) per parameter, reduce_scatter_coalesced's torch.cat and the fetch's torch.cat of the partitions one
// per 128 inputs (PyTorch's CAT_ARRAY_BATCH_SIZE); the cat's inputs are every rank's chunk of each tensor and the
// padding of the short ones.
TEST(ScheduleBuilder, Stage3CopiesRunAKernelPerParameterOrPer128CatInputs) {
  for (int dp : {1, 8}) {
    Scenario s = test::scenario(test::small_llama(2), 3, 1, dp);
    s.training.grad_accum = 2;
    const Plan p = make_plan(s);
    const Schedule sch = make_schedule(s, p, 1);
    int partitions = 0, interleaves = 0, copy_ins = 0;
    for (const Op& op : sch.ops) {
      if (op.kind != OpKind::copy) continue;
      const std::string& n = op.name;
      auto bucket_of = [&](const std::string& suffix) {
        const size_t at = n.find(".bucket");
        return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0 &&
                       at != std::string::npos
                   ? std::stoi(n.substr(at + 7))
                   : -1;
      };
      if (const int i = bucket_of(".partition"); i >= 0) {
        EXPECT_EQ(op.copy.kernel_launches, static_cast<int>(p.buckets[i].tensors.size())) << n;
        ++partitions;
      } else if (const int j = bucket_of(".interleave"); j >= 0) {
        std::int64_t inputs = 0;
        for (const TensorShape& t : p.buckets[j].tensors) {
          const Elements chunk = (t.numel() + dp - 1) / dp;
          for (int r = 0; r < dp; ++r) {
            const Elements have = std::clamp<Elements>(t.numel() - r * chunk, 0, chunk);
            inputs += (have > 0) + (have < chunk);
          }
        }
        EXPECT_EQ(op.copy.kernel_launches, static_cast<int>((inputs + 127) / 128)) << n;
        EXPECT_GE(inputs, static_cast<std::int64_t>(dp * p.buckets[j].tensors.size())) << n;
        ++interleaves;
      } else if (n.size() > 8 && n.compare(n.size() - 8, 8, ".copy_in") == 0) {
        EXPECT_EQ(op.copy.kernel_launches, 1) << n;  // these units' calls cat fewer than 128 partitions
        ++copy_ins;
      } else {
        EXPECT_EQ(op.copy.kernel_launches, 1) << n;
      }
    }
    EXPECT_EQ(partitions, 2 * static_cast<int>(p.buckets.size())) << "dp " << dp;  // one per micro-step
    EXPECT_GT(interleaves, 0) << "dp " << dp;
    // One rank under runtime deepspeed gathers nothing (num_partitions == 1: DeepSpeedCalls.UnderDeepSpeedOneRank...).
    if (dp > 1) EXPECT_GT(copy_ins, 0) << "dp " << dp;
  }
}

// A fused norm's backward (zrun's norm.cu, apex's FusedRMSNorm) reads x and dy and writes dx, then reads x and dy again
// for the weight's gradient: five activations of tokens x hidden, against the forward's two (read x, write y).
// zrun's fused norm (runtime zrun; transformers' eager RMSNorm under runtime deepspeed: transformers_kernels_test.cpp).
TEST(ScheduleBuilder, ANormsBackwardMovesFiveActivations) {
  Scenario s = test::scenario(test::small_llama(2), 0, 1, 1);
  s.runtime = RuntimeKind::zrun;
  const Schedule sch = build(s);
  const Bytes activation = s.training.micro_batch * s.training.seq_len * s.model.hidden * 2;  // bf16
  int norms = 0;
  for (const Op& op : sch.ops) {
    if (op.kind != OpKind::compute || op.unit < 0) continue;
    const std::string& unit = sch.model.units[op.unit].name;
    if (unit.find("norm") == std::string::npos) continue;
    if (op.compute.what == ComputeKind::forward) EXPECT_EQ(op.compute.hbm_bytes, 2 * activation) << op.name;
    if (op.compute.what == ComputeKind::backward) EXPECT_EQ(op.compute.hbm_bytes, 5 * activation) << op.name;
    ++norms;
  }
  EXPECT_EQ(norms, 2 * (2 * 2 + 1));  // attn and mlp norms of two layers and the final norm, forward and backward
}

// DeepSpeed's step() returns before the next forward is issued (CPU Adam runs on the calling thread) and the next
// fetches read the weights it wrote: every op of the first optimizer step comes before the second step's first
// forward compute and every op issued before that compute, through deps and stream order (docs/schedule-semantics.md
// "Execution rules": a stream runs its ops in program order).
TEST(ScheduleBuilder, TheNextStepStartsAfterEveryOpOfTheOptimizerStep) {
  struct Config {
    int stage;
    OffloadDevice optimizer, params;
  };
  for (const Config c : {Config{2, OffloadDevice::cpu, OffloadDevice::none}, Config{3, OffloadDevice::none, OffloadDevice::none},
                         Config{3, OffloadDevice::cpu, OffloadDevice::cpu}, Config{3, OffloadDevice::nvme, OffloadDevice::nvme},
                         Config{1, OffloadDevice::none, OffloadDevice::none}}) {
    Scenario s = test::scenario(test::small_llama(2), c.stage, 1, 4);
    s.zero.offload_optimizer.device = c.optimizer;
    s.zero.offload_param.device = c.params;
    const Schedule sch = build(s, 2);
    const std::string where = "stage " + std::to_string(c.stage) + " optimizer " + std::to_string(static_cast<int>(c.optimizer));
    OpId step_begin = -1, step_end = -1, next = -1;
    for (const Op& op : sch.ops) {
      if (op.phase == Phase::step && step_begin < 0) step_begin = op.id;
      if (step_begin >= 0 && op.phase != Phase::step) {
        step_end = op.id;
        break;
      }
    }
    for (OpId id = step_end; id < static_cast<OpId>(sch.ops.size()); ++id)
      if (sch.ops[id].kind == OpKind::compute && sch.ops[id].phase == Phase::forward) {
        next = id;
        break;
      }
    ASSERT_TRUE(step_begin >= 0 && step_end > step_begin && next > step_end) << where;
    std::vector<OpId> previous_on_stream(sch.ops.size(), -1);
    std::map<int, OpId> last_on;
    for (const Op& op : sch.ops) {
      const auto it = last_on.find(op.stream);
      if (it != last_on.end()) previous_on_stream[op.id] = it->second;
      last_on[op.stream] = op.id;
    }
    auto ancestors_of = [&](OpId id) {
      std::vector<char> seen(sch.ops.size(), 0);
      std::vector<OpId> stack{id};
      while (!stack.empty()) {
        const OpId o = stack.back();
        stack.pop_back();
        std::vector<OpId> before = sch.ops[o].deps;
        if (previous_on_stream[o] >= 0) before.push_back(previous_on_stream[o]);
        for (OpId d : before)
          if (!seen[d]) seen[d] = 1, stack.push_back(d);
      }
      return seen;
    };
    for (OpId id = step_end; id <= next; ++id) {
      if (sch.ops[id].kind == OpKind::alloc || sch.ops[id].kind == OpKind::free) continue;
      const std::vector<char> before = ancestors_of(id);
      for (OpId k = step_begin; k < step_end; ++k)
        if (sch.ops[k].kind != OpKind::free)
          ASSERT_TRUE(before[k]) << where << ": " << sch.ops[id].name << " does not wait for " << sch.ops[k].name;
    }
  }
}

TEST(ScheduleBuilder, ParamOffloadCopiesEachPartitionToTheGpuBeforeItsGather) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  s.zero.offload_param.device = OffloadDevice::cpu;
  const Schedule sch = build(s);
  for (const Op* op : ops_where(sch, [](const Op& o) { return is_collective(o, CollectiveKind::all_gather); })) {
    // The gather waits (through the gathered buffer's alloc) for an h2d copy.
    bool after_h2d = false;
    for (OpId d : op->deps)
      for (OpId dd : sch.ops[d].deps) after_h2d |= sch.ops[dd].kind == OpKind::copy && sch.ops[dd].copy.what == CopyKind::h2d;
    for (OpId d : op->deps) after_h2d |= sch.ops[d].kind == OpKind::copy && sch.ops[d].copy.what == CopyKind::h2d;
    EXPECT_TRUE(after_h2d) << op->name;
  }
}

// offload_param nvme with the partition within max_in_cpu: DeepSpeed swaps every partition in "permanently to CPU" at
// init, so the step is offload_param cpu's op for op, beside the swapper's pool, which it allocates all the same; with
// max_in_cpu 0 every fetch reads NVMe first.
TEST(ScheduleBuilder, ParamOffloadToNvmeWithinMaxInCpuRunsOffloadToCpusSchedule) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  s.zero.offload_param.device = OffloadDevice::cpu;
  const Schedule cpu = build(s);
  s.zero.offload_param.device = OffloadDevice::nvme;
  const Schedule nvme = build(s);
  const auto pool = ops_where(nvme, [](const Op& o) { return o.kind == OpKind::alloc && o.mem.buffer == "params.swap_in"; });
  ASSERT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool[0]->mem.tier, Tier::cpu);
  EXPECT_EQ(pool[0]->mem.bytes, 5 * swap_io_aligned(100'000'000, 2) * 2);  // buffer_count x buffer_size, io-aligned
  ASSERT_EQ(nvme.ops.size(), cpu.ops.size() + 1);
  for (size_t i = 0, j = 0; i < cpu.ops.size(); ++i, ++j) {
    if (nvme.ops[j].id == pool[0]->id) ++j;
    EXPECT_EQ(nvme.ops[j].name, cpu.ops[i].name);
    EXPECT_EQ(nvme.ops[j].kind, cpu.ops[i].kind) << cpu.ops[i].name;
    ASSERT_EQ(nvme.ops[j].uses.size(), cpu.ops[i].uses.size()) << cpu.ops[i].name;
    for (size_t k = 0; k < cpu.ops[i].uses.size(); ++k) {  // the same buffers (their ids one apart past the pool)
      EXPECT_EQ(nvme.ops[nvme.ops[j].uses[k].alloc].name, cpu.ops[cpu.ops[i].uses[k].alloc].name) << cpu.ops[i].name;
      EXPECT_EQ(nvme.ops[j].uses[k].offset, cpu.ops[i].uses[k].offset) << cpu.ops[i].name;
      EXPECT_EQ(nvme.ops[j].uses[k].bytes, cpu.ops[i].uses[k].bytes) << cpu.ops[i].name;
    }
    if (cpu.ops[i].kind == OpKind::alloc) {
      EXPECT_EQ(nvme.ops[j].mem.tier, cpu.ops[i].mem.tier) << cpu.ops[i].name;
      EXPECT_EQ(nvme.ops[j].mem.bytes, cpu.ops[i].mem.bytes) << cpu.ops[i].name;
    }
  }
  s.zero.offload_param.max_in_cpu = 0;
  const Schedule all_nvme = build(s);
  EXPECT_FALSE(ops_where(all_nvme, [](const Op& o) { return o.kind == OpKind::copy && o.copy.what == CopyKind::nvme_read; })
                   .empty());
  for (const Op* a : ops_where(all_nvme, [](const Op& o) { return o.kind == OpKind::alloc && o.phase == Phase::init; }))
    if (a->mem.category == MemCategory::params && a->mem.detail != "persistent") EXPECT_EQ(a->mem.tier, Tier::nvme);
}

// offload_param nvme, partitions of at least 1 MiB: each is read into a buffer of the swapper's pool, the h2d that
// copies it up waits for that read, a read into a buffer waits for the copy out of its previous holder, and the host's
// wait for the reads (synchronize_reads) holds back the compute that follows the fetch.
TEST(ScheduleBuilder, ParamSwapInReadsIntoPoolBuffersThatTheH2dCopiesUpInOrder) {
  Scenario s = test::nvme_swapping();
  s.zero.offload_param.buffer_size = 2'000'000;
  const Plan p = make_plan(s);
  const Schedule sch = make_schedule(s, p, 1);
  const auto pools = ops_where(sch, [](const Op& o) { return o.kind == OpKind::alloc && o.mem.buffer == "params.swap_in"; });
  ASSERT_EQ(pools.size(), 1u);
  const OpId pool = pools[0]->id;
  const Bytes slot = 2 * swap_io_aligned(2'000'000, 2);
  EXPECT_EQ(pools[0]->mem.bytes, 5 * slot);
  auto depends = [&](const Op& op, OpId on) { return std::count(op.deps.begin(), op.deps.end(), on) > 0; };
  std::map<Bytes, OpId> writer, reader;  // per buffer (its offset): the last read into it, the last h2d out of it
  int reads = 0, read_ops = 0, copies = 0, waited_computes = 0;
  for (const Op& op : sch.ops) {
    if (op.kind == OpKind::copy && op.copy.what == CopyKind::nvme_read && op.uses[1].alloc == pool) {
      std::set<Bytes> buffers;  // one swap_in call: a pair per partition, each into a buffer of its own
      for (size_t i = 0; i + 1 < op.uses.size(); i += 2) {
        const Bytes at = op.uses[i + 1].offset;
        EXPECT_EQ(op.uses[i + 1].alloc, pool) << op.name;
        EXPECT_EQ(at % slot, 0) << op.name;
        EXPECT_LE(op.uses[i + 1].bytes, slot) << op.name;
        EXPECT_TRUE(buffers.insert(at).second) << op.name << " reads two partitions into one buffer";
        if (reader.count(at)) EXPECT_TRUE(depends(op, reader[at])) << op.name << " overwrites a buffer not yet copied up";
        writer[at] = op.id;
        ++reads;
      }
      ++read_ops;
    }
    if (op.kind == OpKind::copy && op.copy.what == CopyKind::h2d) {
      for (size_t i = 0; i < op.uses.size(); i += 2) {
        if (op.uses[i].alloc != pool) continue;
        const Bytes at = op.uses[i].offset - op.uses[i].offset % slot;
        ASSERT_TRUE(writer.count(at)) << op.name;
        // through its staging alloc: the alloc waits for the read
        bool after = false;
        for (OpId d : op.deps) after |= d == writer[at] || depends(sch.ops[d], writer[at]);
        EXPECT_TRUE(after) << op.name << " copies up a buffer before its read";
        reader[at] = op.id;
        ++copies;
      }
    }
    if (op.kind == OpKind::compute)
      for (OpId d : op.deps) waited_computes += sch.ops[d].kind == OpKind::copy && sch.ops[d].copy.what == CopyKind::nvme_read;
  }
  EXPECT_EQ(reads, copies);
  // each swapped matrix read for the forward, the layer's recompute and the backward (reuse distance 0)
  EXPECT_EQ(reads, (2 * 7 + 2) + 2 * 7 + (2 * 7 + 2));
  // one op per swap_in call of the plan's trace: a step's own reads (a recompute's module by module), its reads ahead
  int calls = 0;
  for (const FetchStep& st : p.trace) {
    std::set<int> units;
    for (const SwapIn& r : st.swap_in) units.insert(r.unit);
    calls += st.recompute ? static_cast<int>(units.size()) : !st.swap_in.empty();
    calls += !st.swap_in_ahead.empty();
  }
  EXPECT_EQ(read_ops, calls);
  EXPECT_LT(read_ops, reads);
  EXPECT_GT(waited_computes, 0);
}

// Eager attention, summed over a layer's ops: forward = 2 x tokens x layer matrix params + 4 b s^2 h;
// backward = 2 x forward; recompute = forward.
TEST(ScheduleBuilder, ComputeFlopsFollowTheEagerConvention) {
  Scenario s = test::scenario(test::small_llama(1), 3, 1, 8);
  s.model.attention = Attention::eager;
  const Schedule sch = build(s);
  const Plan p = make_plan(s);
  const double tokens = 1024, sq = 1024.0 * 1024.0;
  const double fwd = 2 * tokens * p.shapes.layer.matrix_params() + 4 * 1 * sq * 512;
  std::map<ComputeKind, double> sum;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.layer == 0) sum[op.compute.what] += op.compute.flops;
  EXPECT_DOUBLE_EQ(sum[ComputeKind::forward], fwd);
  EXPECT_DOUBLE_EQ(sum[ComputeKind::recompute], fwd);
  EXPECT_DOUBLE_EQ(sum[ComputeKind::backward], 2 * fwd);
  double head = 0;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.name == "fwd.head") head = op.compute.flops;
  EXPECT_DOUBLE_EQ(head, 2 * tokens * 512 * 1024);
}

// Flash attention is a causal kernel: it does half the full mask's score work, 2 b s^2 h forward, and its
// backward recomputes the scores: 2.5 x its forward (FlashAttention's own FLOP accounting). The GEMMs keep
// the convention: backward twice forward.
TEST(ScheduleBuilder, FlashAttentionFlopsAreThoseOfACausalKernelThatRecomputesInBackward) {
  Scenario s = test::scenario(test::small_llama(1), 3, 1, 8);
  s.model.attention = Attention::flash;
  const Schedule sch = build(s);
  const Plan p = make_plan(s);
  const double tokens = 1024, sq = 1024.0 * 1024.0, h = 512;
  const double gemm = 2 * tokens * p.shapes.layer.matrix_params();
  const double core_fwd = 4 * 1 * sq * h / 2;
  std::map<ComputeKind, double> sum;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.layer == 0) sum[op.compute.what] += op.compute.flops;
  EXPECT_DOUBLE_EQ(sum[ComputeKind::forward], gemm + core_fwd);
  EXPECT_DOUBLE_EQ(sum[ComputeKind::recompute], gemm + core_fwd);
  EXPECT_DOUBLE_EQ(sum[ComputeKind::backward], 2 * gemm + 2.5 * core_fwd);
}

// Of attn.o's FLOPs, flash's fused kernel's are marked (ComputeOp::fused_attention_flops) for an engine that prices
// the kernel apart: the core's forward on the forward and on the layer's recompute, its backward shared out over a
// backward cut into parts. Eager attention's core is GEMM calls: nothing is marked.
TEST(ScheduleBuilder, FlashAttentionsAttnOOpsMarkTheFusedKernelsFlops) {
  Scenario s = test::scenario(test::small_llama(2), 2, 1, 8);
  s.model.attention = Attention::flash;
  s.training.activation_checkpointing = Checkpointing::full;
  s.model.bias = true;
  s.zero.reduce_bucket_size = 100'000;  // a bucket closes between attn.o's weight and bias: its backward is cut in parts
  const AttentionFlops core = attention_core_flops(s.model, s.training);
  auto marked = [](const Schedule& sch, ComputeKind what, const std::string& prefix) {
    double f = 0;
    for (const Op& op : sch.ops)
      if (op.kind == OpKind::compute && op.compute.what == what && op.name.rfind(prefix, 0) == 0)
        f += op.compute.fused_attention_flops;
    return f;
  };
  const Schedule flash = build(s);
  EXPECT_DOUBLE_EQ(marked(flash, ComputeKind::forward, "fwd.L1.attn.o"), core.forward);
  EXPECT_DOUBLE_EQ(marked(flash, ComputeKind::recompute, "recompute.L1"), core.forward);
  const auto parts = ops_where(flash, [](const Op& op) { return op.name.rfind("bwd.L1.attn.o.part", 0) == 0; });
  EXPECT_GE(parts.size(), 2u);
  EXPECT_NEAR(marked(flash, ComputeKind::backward, "bwd.L1.attn.o"), core.backward, core.backward * 1e-12);
  for (const Op& op : flash.ops)
    if (op.kind == OpKind::compute) {
      EXPECT_LE(op.compute.fused_attention_flops, op.compute.flops) << op.name;
      if (op.name.find("attn.o") == std::string::npos && op.name.rfind("recompute.", 0) != 0) {
        EXPECT_EQ(op.compute.fused_attention_flops, 0) << op.name;
      }
    }
  s.model.attention = Attention::eager;
  const Schedule eager = build(s);
  for (const Op& op : eager.ops) {
    if (op.kind == OpKind::compute) {
      EXPECT_EQ(op.compute.fused_attention_flops, 0) << op.name;
    }
  }
}

// The largest bundled shape with every ZeRO++ option builds a schedule that passes check_schedule. Its build time
// is a benchmark target (bench/run.sh part (a), docs/performance.md), not asserted here: a timed unit test fails on
// a loaded machine.
TEST(ScheduleBuilder, Gpt3On1024GpusWithZeroPlusPlusBuildsAValidSchedule) {
  Scenario s = test::scenario(test::gpt3_175b(), 3, 128, 8);
  s.zero.stage3_param_persistence_threshold = 100'000;
  s.zero.zero_quantized_weights = s.zero.zero_quantized_gradients = true;
  s.zero.zero_hpz_partition_size = 8;
  const auto t0 = std::chrono::steady_clock::now();
  const Plan p = make_plan(s);
  const Schedule sch = make_schedule(s, p);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NO_THROW(check_schedule(sch));
  EXPECT_GT(sch.ops.size(), 96u * 2u) << "at least a forward and a backward op per layer";
  std::printf("gpt3-175b on 1024 GPUs (ZeRO++): plan + schedule %.2f ms, %zu ops\n", ms, sch.ops.size());
}

// The builder's output survives the versioned JSON format unchanged (every op kind, ZeRO++, offload).
TEST(ScheduleBuilder, BuiltSchedulesRoundTripThroughJson) {
  Scenario s = test::scenario(test::small_llama(2), 3, 2, 4);
  s.zero.zero_quantized_weights = s.zero.zero_quantized_gradients = true;
  s.zero.zero_hpz_partition_size = 4;
  s.zero.zeropp_loco_param.enabled = true;
  s.zero.offload_optimizer.device = OffloadDevice::nvme;
  s.zero.offload_param.device = OffloadDevice::cpu;
  const Schedule sch = build(s, 2);
  EXPECT_EQ(schedule_from_json_text(schedule_to_json_text(sch)), sch);
}

// Stage 0, and stage 1 without overlap_comm, reduce after the whole backward pass; stage 1 with
// overlap_comm reduces from the gradient hooks, between backward segments.
TEST(ScheduleBuilder, Stage0AndSerialStage1ReduceAfterTheWholeBackward) {
  for (auto [stage, overlap] : {std::pair{0, false}, std::pair{1, false}, std::pair{1, true}}) {
    Scenario s = test::scenario(test::small_llama(3), stage, 1, 8);
    s.zero.overlap_comm = overlap;
    s.zero.reduce_bucket_size = make_plan(s).units[1].params;
    const Schedule sch = build(s);
    OpId first_reduce = -1, last_bwd = -1;
    for (const Op& op : sch.ops) {
      if (op.kind == OpKind::collective && op.phase == Phase::backward && first_reduce < 0) first_reduce = op.id;
      if (op.kind == OpKind::compute && op.compute.what == ComputeKind::backward) last_bwd = op.id;
    }
    ASSERT_GE(first_reduce, 0);
    const bool after = first_reduce > last_bwd;
    EXPECT_EQ(after, !(stage == 1 && overlap)) << "stage " << stage << " overlap " << overlap;
  }
}

// GPU Adam in 16-bit training upcasts each sub-group's gradients to an fp32 copy for the update only.
TEST(ScheduleBuilder, GpuStepHoldsAnFp32GradientCopyPerSubGroupDuringTheUpdate) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 8);
  s.zero.sub_group_size = 100'000;
  const Schedule sch = build(s);
  const Plan p = make_plan(s);
  const auto ups = ops_where(sch, [](const Op& op) { return op.kind == OpKind::alloc && op.mem.detail == "fp32"; });
  ASSERT_EQ(ups.size(), p.sub_groups.size());
  for (size_t i = 0; i < ups.size(); ++i) {
    EXPECT_EQ(ups[i]->mem.bytes, 4 * p.sub_groups[i]);
    EXPECT_EQ(ups[i]->phase, Phase::step);
  }
}

// The backward's activation gradients (`act.grad.s<step>.m<micro>`, detail `grad`) are one buffer per micro-step,
// allocated just before that micro-step's first backward compute op and freed just after its last, and every
// backward compute op reads and writes it (zrun's model keeps the gradients there; docs/schedule-format.md).
TEST(ScheduleBuilder, ActivationGradientsLiveFromAMicroStepsFirstBackwardOpToItsLast) {
  for (int stage : {0, 2, 3})
    for (Checkpointing ck : {Checkpointing::none, Checkpointing::full}) {
      Scenario s = test::scenario(test::small_llama(3), stage, 1, 2);
      s.runtime = RuntimeKind::zrun;  // under DeepSpeed the loss's backward holds its own (loss_work) instead
      s.training.grad_accum = 2;
      s.training.activation_checkpointing = ck;
      s.zero.reduce_bucket_size = 1'000'000;  // buckets close inside units: backward segments and reductions
      const Schedule sch = build(s, 2);
      const Bytes grad_bytes = make_plan(s).activations.backward_grad_bytes;
      int buffers = 0;
      for (const Op& a : sch.ops) {
        if (a.kind != OpKind::alloc || a.mem.detail != "grad") continue;
        ++buffers;
        EXPECT_EQ(a.mem.category, MemCategory::activations);
        EXPECT_EQ(a.mem.bytes, grad_bytes);
        OpId first = -1, last = -1, free_op = -1;
        for (const Op& op : sch.ops)
          if (op.kind == OpKind::free && op.mem.buffer == a.mem.buffer) free_op = op.id;
        // The backward compute ops of this buffer's micro-step: the run of backward-phase ops around the alloc.
        OpId lo = a.id, hi = a.id;
        while (lo > 0 && sch.ops[lo - 1].phase == Phase::backward) --lo;
        while (hi + 1 < static_cast<OpId>(sch.ops.size()) && sch.ops[hi + 1].phase == Phase::backward) ++hi;
        for (OpId id = lo; id <= hi; ++id) {
          const Op& op = sch.ops[id];
          if (op.kind != OpKind::compute || op.compute.what != ComputeKind::backward) continue;
          if (first < 0) first = id;
          last = id;
          bool uses = false;
          for (const BufferUse& u : op.uses)
            uses |= u.alloc == a.id && u.role == Role::activation && u.access == Access::read_write && u.bytes == grad_bytes;
          EXPECT_TRUE(uses) << op.name << " does not use " << a.mem.buffer;
        }
        ASSERT_GE(first, 0) << a.mem.buffer;
        ASSERT_GE(free_op, 0) << a.mem.buffer;
        // Nothing but alloc / free ops between the alloc and the first backward compute op; the free right after the
        // last one (before that segment's reduction), depending on it.
        for (OpId id = a.id + 1; id < first; ++id)
          EXPECT_TRUE(sch.ops[id].kind == OpKind::alloc || sch.ops[id].kind == OpKind::free) << sch.ops[id].name;
        EXPECT_EQ(free_op, last + 1) << a.mem.buffer;
        EXPECT_EQ(sch.ops[free_op].deps, std::vector<OpId>{last});
      }
      EXPECT_EQ(buffers, 2 * 2) << "stage " << stage;  // 2 steps x 2 micro-steps
    }
}

// Full checkpointing: each layer's forward works in `act.fwd_work.L<l>` (detail `forward_work`, the layer's working
// set), allocated just before the layer's first forward unit and freed just after its last; every forward op of the
// layer reads and writes it. Without checkpointing there is none.
TEST(ScheduleBuilder, ACheckpointedLayersForwardWorksInItsOwnWorkingSetBuffer) {
  for (Checkpointing ck : {Checkpointing::none, Checkpointing::full}) {
    Scenario s = test::scenario(test::small_llama(3), 3, 1, 2);
    s.training.activation_checkpointing = ck;
    s.runtime = RuntimeKind::zrun;  // zrun's layers: a forward working set only under checkpointing
    const Plan p = make_plan(s);
    const Schedule sch = build(s);
    int buffers = 0;
    for (const Op& a : sch.ops) {
      if (a.kind != OpKind::alloc || a.mem.detail != "forward_work") continue;
      ++buffers;
      const int l = a.layer;
      ASSERT_GE(l, 0);
      EXPECT_EQ(a.mem.bytes, p.activations.per_layer_work_bytes);
      EXPECT_EQ(a.mem.buffer, "act.fwd_work.L" + std::to_string(l) + ".s0.m0");
      std::vector<OpId> fwd;  // the layer's forward compute ops
      OpId free_op = -1;
      for (const Op& op : sch.ops) {
        if (op.kind == OpKind::compute && op.compute.what == ComputeKind::forward && op.layer == l) fwd.push_back(op.id);
        if (op.kind == OpKind::free && op.mem.buffer == a.mem.buffer) free_op = op.id;
      }
      ASSERT_EQ(fwd.size(), static_cast<size_t>(p.layers[l].last - p.layers[l].first + 1));
      EXPECT_LT(a.id, fwd.front());
      for (OpId id = a.id + 1; id < fwd.front(); ++id) EXPECT_NE(sch.ops[id].kind, OpKind::compute) << sch.ops[id].name;
      EXPECT_EQ(free_op, fwd.back() + 1);
      for (OpId id : fwd) {
        bool uses = false;
        for (const BufferUse& u : sch.ops[id].uses)
          uses |= u.alloc == a.id && u.role == Role::activation && u.access == Access::read_write;
        EXPECT_TRUE(uses) << sch.ops[id].name;
      }
    }
    EXPECT_EQ(buffers, ck == Checkpointing::full ? 3 : 0);
  }
}

// Under DeepSpeed (runtime deepspeed, transformers' modeling code): the loss backward's fp32 gradients are held around
// the head's backward only, and the logits with their fp32 copy around the head's forward only.
TEST(ScheduleBuilder, UnderDeepSpeedTheLossHoldsItsFp32TensorsAroundTheHeadsForwardAndBackwardOnly) {
  Scenario s = test::scenario(test::small_llama(2), 3, 1, 2);
  s.training.activation_checkpointing = Checkpointing::none;
  const Plan p = make_plan(s);
  const Schedule sch = build(s);
  const Bytes T = s.training.micro_batch * s.training.seq_len, V = s.model.vocab;
  for (const auto& [detail, phase, bytes] :
       {std::tuple{"head_work", ComputeKind::forward, 2 * V * T + 4 * V * T},
        std::tuple{"loss_work", ComputeKind::backward, 8 * V * T}}) {
    int found = 0;
    for (const Op& a : sch.ops) {
      if (a.kind != OpKind::alloc || a.mem.detail != detail) continue;
      ++found;
      EXPECT_EQ(a.mem.bytes, bytes) << detail;
      std::vector<OpId> users;  // the compute ops that use the buffer: the head's alone
      OpId free_op = -1;
      for (const Op& op : sch.ops) {
        for (const BufferUse& u : op.uses)
          if (u.alloc == a.id && op.kind == OpKind::compute) users.push_back(op.id);
        if (op.kind == OpKind::free && op.mem.buffer == a.mem.buffer) free_op = op.id;
      }
      ASSERT_EQ(users.size(), 1u) << detail;
      const Op& c = sch.ops[users[0]];
      EXPECT_EQ(c.compute.what, phase) << detail;
      EXPECT_TRUE(p.units[c.unit].is_head) << c.name;
      ASSERT_GE(free_op, 0) << detail;
      EXPECT_EQ(sch.ops[free_op].deps, std::vector<OpId>{c.id}) << detail;
    }
    EXPECT_EQ(found, 1) << detail;
  }
}

// transformers' non-reentrant checkpoint keeps nothing of a layer's forward: under DeepSpeed a checkpointed sdpa
// layer's forward holds no working set beside its kept input, where zrun's holds the whole recompute set.
TEST(ScheduleBuilder, UnderDeepSpeedACheckpointedSdpaLayersForwardHoldsNoWorkingSet) {
  Scenario s = test::scenario(test::small_llama(3), 3, 1, 2);
  s.training.activation_checkpointing = Checkpointing::full;
  s.model.attention = Attention::flash;
  const Schedule deepspeed = build(s);
  s.runtime = RuntimeKind::zrun;
  const Schedule zrun = build(s);
  auto forward_work = [](const Schedule& sch) {
    int n = 0;
    for (const Op& a : sch.ops) n += a.kind == OpKind::alloc && a.mem.detail == "forward_work";
    return n;
  };
  EXPECT_EQ(forward_work(deepspeed), 0);
  EXPECT_EQ(forward_work(zrun), 3);
}

// DeepSpeed's own buffers (docs/deepspeed-memory.md), under runtime deepspeed.
const Op* alloc_named(const Schedule& sch, const std::string& buffer) {
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::alloc && op.mem.buffer == buffer) return &op;
  return nullptr;
}
int frees_of(const Schedule& sch, const std::string& buffer) {
  int n = 0;
  for (const Op& op : sch.ops) n += op.kind == OpKind::free && op.mem.buffer == buffer;
  return n;
}

TEST(ScheduleBuilder, UnderDeepSpeedStage3HoldsOneFlatBucketBufferOfReduceBucketSizeForTheRun) {
  Scenario s = test::scenario(test::small_llama(3), 3, 1, 2);
  s.zero.reduce_bucket_size = 50'000'000;  // larger than the model: DeepSpeed allocates it whole all the same
  const Schedule sch = build(s, 2);
  const Op* ipg = alloc_named(sch, "ipg_flat_buffer");
  ASSERT_NE(ipg, nullptr);
  EXPECT_EQ(ipg->phase, Phase::init);
  EXPECT_EQ(ipg->mem.bytes, 2 * 50'000'000);
  EXPECT_EQ(frees_of(sch, "ipg_flat_buffer"), 0);
  int buckets = 0;  // no bucket buffer of its own: every bucket fills the flat one
  for (const Op& op : sch.ops) buckets += op.kind == OpKind::alloc && op.mem.buffer.rfind("bucket.", 0) == 0;
  EXPECT_EQ(buckets, 0);
}

TEST(ScheduleBuilder, UnderDeepSpeedStages1And2AllocateOneIpgBufferPerBackwardOrTwoWithOverlapComm) {
  for (int stage : {1, 2})
    for (bool overlap : {false, true}) {
      Scenario s = test::scenario(test::small_llama(3), stage, 1, 2);
      s.zero.overlap_comm = overlap;
      s.zero.reduce_bucket_size = 40'000'000;
      const Schedule sch = build(s, 1);
      for (int k = 0; k < 2; ++k) {
        const std::string name = "ipg_buffer." + std::to_string(k) + ".s0.m0";
        const Op* a = alloc_named(sch, name);
        if (k == 1 && !overlap) {
          EXPECT_EQ(a, nullptr) << stage;
          continue;
        }
        ASSERT_NE(a, nullptr) << name << " stage " << stage;
        EXPECT_EQ(a->phase, Phase::backward);
        EXPECT_EQ(a->mem.bytes, 2 * 40'000'000);
        EXPECT_EQ(frees_of(sch, name), 1) << name;
      }
    }
}

TEST(ScheduleBuilder, UnderDeepSpeedBf16Stage0KeepsAWholeFp32GradientBufferAndPartitionsTheOptimizer) {
  Scenario s = test::scenario(test::small_llama(3), 0, 1, 4);
  const Plan p = make_plan(s);
  const Schedule sch = build(s, 1);
  const Op* g32 = alloc_named(sch, "grads.fp32");
  ASSERT_NE(g32, nullptr);
  EXPECT_EQ(g32->mem.bytes, 4 * p.params);
  const Elements align = 2 * 4;
  EXPECT_EQ(p.optimizer_partition, (p.params + align - 1) / align * align / 4);
  EXPECT_EQ(alloc_named(sch, "optimizer")->mem.bytes, 12 * p.optimizer_partition);
  s.runtime = RuntimeKind::zrun;
  EXPECT_EQ(make_plan(s).optimizer_partition, p.params);
  EXPECT_EQ(alloc_named(build(s, 1), "grads.fp32"), nullptr);
}

TEST(ScheduleBuilder, UnderDeepSpeedStage2FlattensTheGradientPartitionForTheStep) {
  Scenario s = test::scenario(test::small_llama(3), 2, 1, 2);
  const Plan p = make_plan(s);
  const Schedule sch = build(s, 1);
  const Op* flat = alloc_named(sch, "grads.step_flat.s0.m0");
  ASSERT_NE(flat, nullptr);
  EXPECT_EQ(flat->phase, Phase::step);
  EXPECT_EQ(flat->mem.bytes, 2 * p.optimizer_partition);
  EXPECT_EQ(frees_of(sch, "grads.step_flat.s0.m0"), 1);
}

TEST(ScheduleBuilder, UnderDeepSpeedStage2HoldsItsGradientPartitionFromTheFirstCopyToTheStep) {
  Scenario s = test::scenario(test::small_llama(3), 2, 1, 2);
  const Schedule sch = build(s, 2);
  for (int step : {0, 1}) {
    const std::string name = "grads.partition.s" + std::to_string(step) + ".m0";
    const Op* a = alloc_named(sch, name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->phase, Phase::backward);
    const Op& next = sch.ops[a->id + 1];  // the copy into it
    EXPECT_NE(next.name.find("copy_grads_in_partition"), std::string::npos) << next.name;
    OpId freed = -1;
    for (const Op& op : sch.ops)
      if (op.kind == OpKind::free && op.mem.buffer == name) freed = op.id;
    ASSERT_GE(freed, 0) << name;
    EXPECT_EQ(sch.ops[freed].phase, Phase::step);
  }
  EXPECT_EQ(alloc_named(sch, "grads.partition"), nullptr);  // not held for the run
}

// DeepSpeed 0.14.5's stage-3 step on the GPU (stage3.py _prepare_fp32_grad_for_sub_group): each sub-group's 16-bit
// gradient partitions are flattened into a new tensor and that is converted to fp32, so the flat copy (2 bytes an
// element) and the fp32 gradient (4) live at once, the sub-group by sub-group; the flat copy is gone before Adam runs.
// With the params on the CPU the updated weights go down without a 16-bit copy on the GPU (torch converts a blocking
// copy on the CPU).
TEST(ScheduleBuilder, DeepSpeedStage3StepFlattensEachSubGroupBeforeItsFp32Copy) {
  for (OffloadDevice params : {OffloadDevice::none, OffloadDevice::cpu}) {
    Scenario s = test::scenario(test::small_llama(2), 3, 1, 1);
    s.runtime = RuntimeKind::deepspeed;
    s.zero.offload_param.device = params;
    const Plan p0 = make_plan(s);
    s.zero.sub_group_size = p0.optimizer_partition / 3;  // several sub-groups
    const Plan p = make_plan(s);
    ASSERT_GE(p.sub_groups.size(), 3u);
    const Schedule sch = make_schedule(s, p, 1);
    std::map<std::string, const MemOp*> open;
    Bytes step_grads = 0, most = 0, flat = 0;
    for (const Op& op : sch.ops) {
      if (op.phase != Phase::step) continue;
      EXPECT_FALSE(op.kind == OpKind::alloc && op.mem.tier == Tier::gpu && op.mem.detail == "param_d2h");
      if (op.kind == OpKind::compute && op.compute.what == ComputeKind::optimizer) {
        EXPECT_EQ(flat, 0) << op.name;  // Adam runs on the fp32 copy alone
        EXPECT_GT(step_grads, 0) << op.name;
      }
      if ((op.kind != OpKind::alloc && op.kind != OpKind::free) || op.mem.tier != Tier::gpu) continue;
      if (op.kind == OpKind::alloc) open[op.mem.buffer] = &op.mem;
      const MemOp& m = op.kind == OpKind::alloc ? op.mem : *open.at(op.mem.buffer);
      if (m.category != MemCategory::grads || (m.detail != "step_flat" && m.detail != "fp32")) continue;
      step_grads += op.kind == OpKind::alloc ? m.bytes : -m.bytes;
      if (m.detail == "step_flat") flat += op.kind == OpKind::alloc ? m.bytes : -m.bytes;
      most = std::max(most, step_grads);
    }
    const Elements largest = *std::max_element(p.sub_groups.begin(), p.sub_groups.end());
    EXPECT_EQ(most, (p.elem_bytes + 4) * largest);
    EXPECT_EQ(step_grads, 0);
  }
}
