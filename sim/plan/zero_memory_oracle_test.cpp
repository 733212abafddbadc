// Oracles for memory derived by walking the schedule (sim/report/memory_walk): the ZeRO paper's
// model-state bytes, DeepSpeed's offload estimators and Korthikanti's activation bytes, each written
// here in closed form.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/plan/schedule_builder.hpp"
#include "sim/plan/test_scenarios.hpp"
#include "sim/report/memory_walk.hpp"

using namespace zsim;

namespace {

struct Walked {
  Plan plan;
  Schedule schedule;
  MemoryWalk memory;
};
Walked walk(const Scenario& s) {
  Walked w{make_plan(s), {}, {}};
  w.schedule = make_schedule(s, w.plan);
  w.memory = walk_memory(w.schedule, MemoryCapacity{});
  return w;
}
Bytes model_states(const MemoryBreakdown& m) { return m.params + m.grads + m.optimizer; }
OpId op_named(const Schedule& s, const std::string& name) {
  for (const Op& op : s.ops)
    if (op.name == name) return op.id;
  return -1;
}

}  // namespace

// ZeRO paper (Rajbhandari et al. 2020, fig. 1), mixed-precision Adam, K = 12, per GPU:
//   stage 0: (2 + 2 + K) Psi; stage 1: 2 Psi + 2 Psi + K Psi / N; stage 2: 2 Psi + (2 + K) Psi / N;
//   stage 3: (2 + 2 + K) Psi / N. These models' tensors all divide by N, so stage 3 pads nothing. Stages 1-2
//   flatten the model into one buffer that DeepSpeed pads to a multiple of 2N (stage_1_and_2.py,
//   nccl_start_alignment_factor 2 x dp): the paper's figure of that padded Psi (which is Psi itself wherever 2N
//   divides it; GPT-2 1.5B on 64 ranks is the case here where it does not).
TEST(ZeroMemoryOracle, ModelStatesPerGpuAreTheZeroPapers) {
  for (const ModelSpec& m : {test::gpt2_1_5b(), test::llama2_7b(), test::llama2_70b()})
    for (auto [nodes, gpn] : {std::pair{1, 8}, std::pair{2, 8}, std::pair{8, 8}}) {
      const double N = nodes * gpn, K = 12;
      for (int stage = 0; stage <= 3; ++stage) {
        Scenario s = test::scenario(m, stage, nodes, gpn);
        s.runtime = RuntimeKind::zrun;  // the paper's model states; DeepSpeed adds its buffers (deepspeed-memory.md)
        const Walked w = walk(s);
        const double unpadded = static_cast<double>(w.plan.params);
        const double psi = stage == 1 || stage == 2 ? std::ceil(unpadded / (2 * N)) * 2 * N : unpadded;
        const double oracle = stage == 0   ? (2 + 2 + K) * psi
                              : stage == 1 ? 2 * psi + 2 * psi + K * psi / N
                              : stage == 2 ? 2 * psi + (2 + K) * psi / N
                                           : (2 + 2 + K) * psi / N;
        EXPECT_EQ(model_states(w.memory.gpu.at_end), static_cast<Bytes>(oracle))
            << m.name << " stage " << stage << " N " << N;
      }
    }
}

// DeepSpeed's estimate_zero2_model_states_mem_needs (runtime/zero/stage_1_and_2.py) with
// cpu_offload=True, additional_buffer_factor=1:
//   gpu_mem = 2 Psi;   cpu_mem = Psi * max(4 * total_gpus, 16)   (per node; one node here).
// zsim matches the 16 Psi term (fp32 master + Adam moments 12 + fp32 grads 4 per parameter, summed over
// the node's ranks); the 4 * total_gpus term is the fp32 model DeepSpeed loads per process at init,
// outside the training step, so the test uses 4 GPUs where max() picks 16 Psi.
TEST(ZeroMemoryOracle, Zero2CpuOffloadMatchesDeepSpeedEstimator) {
  for (const ModelSpec& m : {test::gpt2_1_5b(), test::llama2_7b()}) {
    Scenario s = test::scenario(m, 2, 1, 4);
    s.zero.offload_optimizer.device = OffloadDevice::cpu;
    const Walked w = walk(s);
    const Bytes psi = w.plan.params;
    const Bytes total_gpus = 4;
    EXPECT_EQ(model_states(w.memory.gpu.at_end), 2 * psi) << m.name;
    EXPECT_EQ(model_states(w.memory.cpu.at_end), psi * std::max<Bytes>(4 * total_gpus, 16)) << m.name;
  }
}

// DeepSpeed's estimate_zero3_model_states_mem_needs (runtime/zero/stage3.py), zero_init=True,
// additional_buffer_factor=1, largest_layer_memory = 4 * largest_layer_params:
//   offload optimizer + params: gpu = largest_layer_memory;              cpu = 18 Psi / nodes
//   offload optimizer only:     gpu = largest_layer_memory + 2 Psi / N;  cpu = 16 Psi / nodes
// zsim matches the GPU model-state term (0, resp. 2 Psi / N) and the CPU figures plus one buffer the estimator leaves
// out: stage3.py keeps the 16-bit gradient partitions in host memory with the optimizer offloaded
// (grad_partitions_flat_buffer, on self.device = cpu), 2 Psi / N per rank, 2 Psi / nodes per node. The
// largest-layer term (one gathered module + its gradient) is a transient; it is checked on its own in
// Zero3FullOffloadGpuBuffersAreDeepSpeedsLargestLayerTerm.
TEST(ZeroMemoryOracle, Zero3OffloadMatchesDeepSpeedEstimator) {
  for (const ModelSpec& m : {test::llama2_7b(), test::llama2_70b()})
    for (auto [nodes, gpn] : {std::pair{1, 8}, std::pair{4, 8}}) {
      const Bytes N = nodes * gpn;
      Scenario s = test::scenario(m, 3, nodes, gpn);
      s.zero.offload_optimizer.device = OffloadDevice::cpu;
      const Walked opt_only = walk(s);
      const Bytes psi = opt_only.plan.params;
      EXPECT_EQ(model_states(opt_only.memory.gpu.at_end), 2 * psi / N) << m.name;
      EXPECT_EQ(model_states(opt_only.memory.cpu.at_end), (16 + 2) * psi / nodes) << m.name;
      s.zero.offload_param.device = OffloadDevice::cpu;
      const Walked both = walk(s);
      EXPECT_EQ(model_states(both.memory.gpu.at_end), 0) << m.name;
      EXPECT_EQ(model_states(both.memory.cpu.at_end), (18 + 2) * psi / nodes) << m.name;
    }
}

// Korthikanti et al. 2022: sbh(34 + 5as/h) bytes per GPT layer without recomputation (plus the two norms' fp32
// mean and rstd, 16 bytes per token, which the paper leaves out). After the last layer's forward every layer's
// activations are live.
TEST(ZeroMemoryOracle, ActivationsWithoutRecomputationAreKorthikantiPerLayer) {
  Scenario s = test::scenario(test::gpt3_175b(), 3, 1, 8);
  s.model.layers = 4;  // the per-layer figure does not depend on depth; keep the test small
  s.runtime = RuntimeKind::zrun;  // Korthikanti's inventory is zrun's layers' (DeepSpeed's: transformers_activations)
  s.model.attention = Attention::eager;  // Korthikanti's setup (the preset keeps its dropout 0.1)
  s.training.activation_checkpointing = Checkpointing::none;
  s.training.seq_len = 2048;
  s.training.micro_batch = 2;
  const Walked w = walk(s);
  const double S = 2048, b = 2, h = 12288, a = 96, L = 4;
  // Every layer's activations are live once the last layer has started; the last layer's last unit then
  // writes the head's input, so the head's buffer (the final norm's input and output 2 x 2sbh, its statistics
  // 8sb, logits: sb x vocab x (2 + 4) bytes) joins them.
  const OpId last_up = op_named(w.schedule, "fwd.L3.mlp.up");
  const OpId last_fwd = op_named(w.schedule, "fwd.L3.mlp.down");
  ASSERT_GE(last_up, 0);
  ASSERT_GE(last_fwd, 0);
  const Bytes layers = static_cast<Bytes>(L * (S * b * h * (34 + 5 * a * S / h) + 16 * S * b));
  EXPECT_EQ(live_after(w.schedule, last_up, Tier::gpu).activations, layers);
  EXPECT_EQ(live_after(w.schedule, last_fwd, Tier::gpu).activations,
            layers + static_cast<Bytes>(2 * 2 * S * b * h + 8 * S * b + S * b * s.model.vocab * (2 + 4)));
}

// Full checkpointing: the layer inputs (2sbh each) stay; a layer's forward computes its whole working set
// (Korthikanti's layer without its input, plus the norms' statistics) before keeping only its input, and the
// recompute rebuilds that working set for the layer's backward, while the backward's activation gradients are live
// (eager: 4 x 2sbh + 2 x 2sbh (K, V: kv_dim = h) + 2 x 2sbf + 2as^2b).
TEST(ZeroMemoryOracle, ActivationsWithFullCheckpointingAreInputsPlusOneLayersWorkingSetAndGradients) {
  Scenario s = test::scenario(test::gpt3_175b(), 3, 1, 8);
  s.model.layers = 4;
  s.runtime = RuntimeKind::zrun;
  s.model.attention = Attention::eager;  // Korthikanti's setup (the preset keeps its dropout 0.1)
  s.training.activation_checkpointing = Checkpointing::full;
  s.training.seq_len = 2048;
  s.training.micro_batch = 1;
  const Walked w = walk(s);
  const double S = 2048, b = 1, h = 12288, f = 4 * h, a = 96, L = 4;
  const Bytes work = static_cast<Bytes>(S * b * h * (34 + 5 * a * S / h) + 16 * S * b - 2 * S * b * h);
  const Bytes grads = static_cast<Bytes>(4 * 2 * S * b * h + 2 * 2 * S * b * h + 2 * 2 * S * b * f + 2 * a * S * S * b);
  // Forward of layer 2: the inputs of layers 0-2 and layer 2's working set.
  const OpId fwd_l2 = op_named(w.schedule, "fwd.L2.attn.q");
  ASSERT_GE(fwd_l2, 0);
  EXPECT_EQ(live_after(w.schedule, fwd_l2, Tier::gpu).activations, static_cast<Bytes>(3 * 2 * S * b * h) + work);
  const OpId recompute_last = op_named(w.schedule, "recompute.L3");
  ASSERT_GE(recompute_last, 0);
  EXPECT_EQ(live_after(w.schedule, recompute_last, Tier::gpu).activations,
            static_cast<Bytes>(L * 2 * S * b * h) + work + grads);
}

// hpZ trades memory for cross-node traffic: a secondary 16-bit partition of Psi / hpz per GPU is live
// through the backward pass.
TEST(ZeroMemoryOracle, HpzSecondaryPartitionIsTwoPsiOverHpzAtThePeak) {
  Scenario s = test::scenario(test::llama2_7b(), 3, 4, 8);
  s.model.layers = 4;
  s.zero.zero_hpz_partition_size = 8;
  s.runtime = RuntimeKind::zrun;  // no buffer left at the end (DeepSpeed holds its ipg flat buffer for the run)
  const Walked w = walk(s);
  EXPECT_EQ(w.memory.gpu.at_peak.buffer_detail.at("hpz"), 2 * w.plan.params / 8);
  EXPECT_EQ(w.memory.gpu.at_end.buffers, 0);  // freed after the step
}

// DeepSpeed's zero3 estimator with optimizer and params offloaded puts 4 * largest_layer_params on the
// GPU: one gathered 16-bit module plus its 16-bit gradient. zsim's schedule holds that at its busiest point
// when nothing else is in flight (no prefetch or reuse, no overlap, and a reduce bucket of the largest module's
// size; activations aside), plus what partition_grads (stage3.py) holds while it offloads that gradient and the
// estimator leaves out: the 16-bit partition brought back up from host memory (2 L / N) and the float64 copy
// _constant_buffered_norm2 takes its norm of (8 L / N: the largest module here, the embedding, is one tensor of fewer
// than 250M elements a rank). Its fp32 conversion is made on the CPU (a blocking copy_ into the CPU's fp32 gradient).
TEST(ZeroMemoryOracle, Zero3FullOffloadGpuBuffersAreDeepSpeedsLargestLayerTerm) {
  Scenario s = test::scenario(test::llama2_7b(), 3, 1, 8);
  s.zero.offload_optimizer.device = OffloadDevice::cpu;
  s.zero.offload_param.device = OffloadDevice::cpu;
  s.zero.stage3_prefetch_bucket_size = 0;
  s.zero.stage3_max_reuse_distance = 0;
  s.zero.overlap_comm = false;
  s.training.activation_checkpointing = Checkpointing::none;
  const Plan plan = make_plan(s);
  const Elements largest_layer_params = plan.largest_module_params;  // DeepSpeed's name for it
  s.zero.reduce_bucket_size = largest_layer_params;
  const Schedule sch = make_schedule(s, make_plan(s));
  Bytes most = 0;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::alloc && op.mem.tier == Tier::gpu)
      most = std::max(most, live_after(sch, op.id, Tier::gpu).buffers);
  const Bytes N = 8;
  EXPECT_EQ(most, 4 * largest_layer_params + 2 * largest_layer_params / N + 8 * largest_layer_params / N);
}
