// Oracles for communication derived by walking the schedule (sim/report/comm_walk): bytes each GPU
// sends per step for ZeRO 0-3, and the cross-node volume of ZeRO++ (3M -> 0.75M + scales), each written
// here in closed form.
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/plan/quantization.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"
#include "sim/report/comm_walk.hpp"

using namespace zsim;

namespace {
CommWalk comm_of(const Scenario& s, int steps = 1) { return walk_comm(make_schedule(s, make_plan(s), steps)); }
std::int64_t collectives(const CommWalk& c) {
  std::int64_t n = 0;
  for (const auto& x : c.collectives) n += x.count;
  return n;
}
}  // namespace

// Per GPU per step, in elements of the training dtype (2 bytes for bf16), on N ranks:
//   data parallel (stage 0): all-reduce 2 Psi (N-1)/N
//   stages 1-2 as the ZeRO paper counts them (a reduce-scatter): Psi (N-1)/N + all-gather Psi (N-1)/N
//     = 2 Psi (N-1)/N. DeepSpeed matches it with use_multi_rank_bucket_allreduce: false, whose reduces
//     to each slice's owner send Psi (N-1)/N per GPU on average (every rank but the root sends once).
//   stage 3: forward all-gather + backward all-gather + reduce-scatter = 3 Psi (N-1)/N
// Tolerance: one byte of rounding per collective plus bucket padding to a multiple of N elements.
// stage3_max_reuse_distance = 0 so that no unit stays gathered from its forward into its backward
// (with reuse, the head's backward all-gather is skipped and stage 3 sends less than 3 Psi), and no
// activation checkpointing (whose recompute, without reuse, gathers the layers a third time).
TEST(ZeroCommOracle, BytesSentPerGpuPerStepAre2Or3TimesParams) {
  for (const ModelSpec& m : {test::llama2_7b(), test::llama3_8b()})
    for (auto [nodes, gpn] : {std::pair{1, 8}, std::pair{4, 8}, std::pair{16, 8}})
      for (int stage = 0; stage <= 3; ++stage) {
        Scenario s = test::scenario(m, stage, nodes, gpn);
        // zrun's trace: DeepSpeed's prefetch, running up to stage3_max_live_parameters ahead, marks the units still
        // gathered when it reaches the backward's part of its queue, and release_sub_module keeps those (test
        // DeepSpeedFetch.*), so DeepSpeed gathers less than 3 Psi even without reuse.
        s.runtime = RuntimeKind::zrun;
        s.zero.stage3_max_reuse_distance = 0;
        s.zero.use_multi_rank_bucket_allreduce = false;
        s.training.activation_checkpointing = Checkpointing::none;
        const CommWalk c = comm_of(s);
        const double N = nodes * gpn, psi = static_cast<double>(make_plan(s).params), e = 2;
        const double factor = stage == 3 ? 3 : 2;
        const double oracle = factor * psi * e * (N - 1) / N;
        const double tol = collectives(c) * (1 + N * e);
        EXPECT_NEAR(c.per_gpu.total(), oracle, tol) << m.name << " stage " << stage << " N " << N;
      }
}

// DeepSpeed's default for stages 1-2 (use_multi_rank_bucket_allreduce: true) all-reduces every bucket
// and keeps the owned slices: 2 Psi (N-1)/N per micro-step, plus the parameter all-gather Psi (N-1)/N,
// so 3 Psi (N-1)/N per step, half as much again as the paper's reduce-scatter.
TEST(ZeroCommOracle, DefaultBucketAllReduceSendsThreeTimesParamsAtStages1And2) {
  for (auto [nodes, gpn] : {std::pair{1, 8}, std::pair{8, 8}})
    for (int stage : {1, 2}) {
      Scenario s = test::scenario(test::llama2_7b(), stage, nodes, gpn);
      const CommWalk c = comm_of(s);
      const double N = nodes * gpn, psi = static_cast<double>(make_plan(s).params), e = 2;
      EXPECT_NEAR(c.per_gpu.backward, 2 * psi * e * (N - 1) / N, collectives(c) * (1 + N * e)) << stage;
      EXPECT_NEAR(c.per_gpu.step, psi * e * (N - 1) / N, collectives(c) * (1 + N * e)) << stage;
    }
}

// communication_data_type fp32 with a bf16 model: DeepSpeed reduces `tensor.to(torch.float32)` (stage_1_and_2.py
// allreduce_bucket and gradient_reduction_w_predivide, stage3.py __avg_scatter_grads, engine.py allreduce_bucket
// for stage 0), so every gradient reduction sends twice the bytes; the parameter all-gathers (forward, and the
// stage 1-2 step) stay 16-bit. Per GPU per step: backward gradient bytes 2x, everything else unchanged.
TEST(ZeroCommOracle, Fp32CommunicationDoublesTheGradientReductionBytesOfA16BitModel) {
  for (int stage = 0; stage <= 3; ++stage)
    for (bool multi : {true, false}) {
      Scenario s = test::scenario(test::llama2_7b(), stage, 2, 8);
      s.zero.use_multi_rank_bucket_allreduce = multi;
      s.zero.stage3_max_reuse_distance = 0;
      const CommWalk bf16 = comm_of(s);
      s.training.communication_data_type = Precision::fp32;
      const CommWalk fp32 = comm_of(s);
      Bytes grads16 = 0, grads32 = 0, other16 = 0, other32 = 0;
      for (const auto& c : bf16.collectives)
        (c.phase == Phase::backward && c.op != CollectiveKind::all_gather ? grads16 : other16) += c.bytes_per_gpu;
      for (const auto& c : fp32.collectives)
        (c.phase == Phase::backward && c.op != CollectiveKind::all_gather ? grads32 : other32) += c.bytes_per_gpu;
      for (const Op& op : make_schedule(s, make_plan(s), 1).ops)
        if (op.kind == OpKind::collective && op.phase == Phase::backward && op.collective.what != CollectiveKind::all_gather)
          EXPECT_EQ(op.collective.dtype, DType::fp32) << op.name;
      ASSERT_GT(grads16, 0);
      // One byte of rounding per collective (bytes x (N-1)/N).
      EXPECT_NEAR(static_cast<double>(grads32), 2.0 * static_cast<double>(grads16), 2.0 * collectives(fp32))
          << "stage " << stage << " multi " << multi;
      EXPECT_EQ(other32, other16) << "stage " << stage << " multi " << multi;
    }
}

// Gradient accumulation: stages 0-1 reduce once per step, stage 2 and 3 every micro-step.
TEST(ZeroCommOracle, GradientAccumulationMultipliesOnlyPartitionedGradientReductions) {
  const ModelSpec m = test::llama2_7b();
  for (int stage = 0; stage <= 3; ++stage) {
    Scenario s = test::scenario(m, stage, 2, 8);
    const Bytes one = comm_of(s).per_gpu.backward;
    s.training.grad_accum = 4;
    const Bytes four = comm_of(s).per_gpu.backward;
    EXPECT_EQ(four, stage >= 2 ? 4 * one : one) << "stage " << stage;
  }
}

// Steps are walked separately and the walk reports per step: two steps give the same per-step figures.
TEST(ZeroCommOracle, PerStepFiguresDoNotDependOnTheNumberOfStepsBuilt) {
  const Scenario s = test::scenario(test::llama2_7b(), 3, 2, 8);
  EXPECT_EQ(comm_of(s, 1).per_gpu.total(), comm_of(s, 2).per_gpu.total());
}

// Cross-node bytes per node per step, k nodes, M = 2 Psi bytes (bf16):
//   plain ZeRO-3 on the world group: 3 M (k-1)/k.
//   ZeRO++ (qwZ + hpZ = gpus_per_node + qgZ): the forward all-gather in int8 is M/2 (k-1)/k, the
//   backward all-gather stays inside the node (hpZ), the gradients cross once in int4 after the
//   intra-node reduction: M/4 (k-1)/k. Exactly, the rest is quantization scales and the 1-D tensors
//   (norm weights) that DeepSpeed reduce-scatters in 16 bits:
//     forward:  sum over units u of N * 4 * qwz_groups(partition_u) * (k-1)/k          (qwZ scales)
// (DeepSpeed quantizes each fetch call's concatenated partitions as one tensor; without prefetch every
// call is one module, so the scales are counted per unit.)
//     backward: sum over matrices (4 * gpn * floor(max(r, c, N) / gpn)) (k-1)/k           (qgZ scales)
//               + 2 * vector_elements * (k-1)/k   (16-bit reduce-scatter: S (k-1)/(k r_g) per GPU x gpn)
TEST(ZeroCommOracle, ZeroPlusPlusCutsCrossNodeVolumeFrom3MTo075MPlusScales) {
  for (int nodes : {2, 4, 16}) {
    const int gpn = 8;
    const double k = nodes, N = nodes * gpn;
    Scenario s = test::scenario(test::llama2_7b(), 3, nodes, gpn);
    s.zero.stage3_max_reuse_distance = 0;  // every unit gathered for forward and again for backward
    s.zero.stage3_prefetch_bucket_size = 0;  // one module per fetch call
    s.training.activation_checkpointing = Checkpointing::none;
    const Plan p = make_plan(s);
    const double M = 2.0 * p.params, f = (k - 1) / k;
    const CommWalk plain = comm_of(s);
    EXPECT_NEAR(plain.cross_node_per_node_total(), 3 * M * f, collectives(plain) * gpn) << nodes;

    s.zero.zero_quantized_weights = true;
    s.zero.zero_quantized_gradients = true;
    s.zero.zero_hpz_partition_size = gpn;
    const CommWalk zpp = comm_of(s);
    double qwz_scales = 0, qgz_scales = 0, vectors = 0, matrices = 0;
    for (const FetchUnit& u : p.units) {
      qwz_scales += N * 4.0 * qwz_groups(u.partition);
      for (const TensorShape& t : u.tensors) {
        if (t.is_matrix()) {
          matrices += t.numel();
          qgz_scales += 4.0 * gpn * (std::max<std::int64_t>({t.rows, t.cols, static_cast<std::int64_t>(N)}) / gpn);
        } else {
          vectors += t.numel();
        }
      }
    }
    const double oracle = (M / 2) * f + qwz_scales * f + (2 * matrices / 4) * f + qgz_scales * f +
                          2 * vectors * f;
    EXPECT_NEAR(zpp.cross_node_per_node_total(), oracle, collectives(zpp) * gpn) << nodes;
    // The headline: about a quarter of plain ZeRO-3 (0.75M vs 3M), scales and norms under 1% of M.
    EXPECT_NEAR(zpp.cross_node_per_node_total() / (M * f), 0.75, 0.01) << nodes;
    EXPECT_NEAR((zpp.cross_node_scale_per_gpu.total() * gpn) / f, qwz_scales + qgz_scales,
                collectives(zpp) * gpn) << nodes;
  }
}

// With full checkpointing and DeepSpeed's default reuse distance (1e9 > one Llama-2-7B layer), the
// recompute's gathers serve the backward too: stage 3 still sends at most 3 Psi (N-1)/N per GPU.
TEST(ZeroCommOracle, CheckpointingWithDefaultReuseAddsNoGathers) {
  Scenario s = test::scenario(test::llama2_7b(), 3, 2, 8);
  s.training.activation_checkpointing = Checkpointing::full;
  const CommWalk c = comm_of(s);
  const double N = 16, psi = static_cast<double>(make_plan(s).params);
  EXPECT_LE(c.per_gpu.total(), 3 * psi * 2 * (N - 1) / N + collectives(c) * (1 + 2 * N));
  EXPECT_GT(c.per_gpu.total(), 2.5 * psi * 2 * (N - 1) / N);
}
