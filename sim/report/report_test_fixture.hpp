// A small ZeRO-3 step with optimizer offload, hand-built for the report tests, with its closed-form sizes.
#pragma once
#include <string>

#include "sim/report/walk_test_util.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim::testing {

// 2 nodes x 4 GPUs, 2 layers of kP / 2 parameters each, bf16; ZeRO-3 partitions over all 8 GPUs.
struct SmallStep {
  static constexpr int kNodes = 2;
  static constexpr int kGpn = 4;
  static constexpr int kN = kNodes * kGpn;
  static constexpr Elements kP = 8'388'608;           // parameters (2^23: every share below is exact)
  static constexpr Bytes kLayer = kP / 2 * 2;         // bf16 bytes of one layer's parameters
  static constexpr Bytes kParamShard = 2 * kP / kN;   // bf16 params per GPU
  static constexpr Bytes kGradShard = 2 * kP / kN;    // bf16 grads per GPU
  static constexpr Bytes kOptShard = 12 * kP / kN;    // fp32 master + exp_avg + exp_avg_sq per GPU
  static constexpr Bytes kAct = 3'000'000;            // activations kept per layer
  static constexpr Bytes kSwap = kOptShard / 4;       // CPU staging buffer for NVMe optimizer swaps

  // Peaks (closed form). GPU: both layers' activations, one gathered layer and one gradient bucket
  // (layer-sized) live in the backward of the last layer.
  static constexpr Bytes kGpuPeak = kParamShard + kGradShard + 2 * kAct + kLayer + kLayer;
};

inline Scenario small_scenario(Bytes hbm, OffloadDevice optimizer_on) {
  Scenario sc;
  sc.source_file = "scenarios/small.yaml";
  sc.model.name = "tiny";
  sc.cluster.nodes = SmallStep::kNodes;
  sc.cluster.gpus_per_node = SmallStep::kGpn;
  sc.cluster.gpu.name = "h100-80gb";
  sc.cluster.gpu.hbm_bytes = hbm;
  sc.cluster.host.memory_bytes = 1 * kGiB;
  sc.cluster.nvme.bytes = 4 * kGiB;
  sc.zero.stage = 3;
  sc.zero.offload_optimizer.device = optimizer_on;
  sc.warnings = {"deepspeed.zero_optimization.round_robin_gradients is accepted but not modelled"};
  return sc;
}

// Optimizer states on `optimizer_on` (cpu or nvme; nvme also stages through a CPU buffer).
inline Schedule small_step(Tier optimizer_on) {
  using S = SmallStep;
  Schedule s;
  s.meta = {"scenarios/small.yaml", S::kN, S::kNodes, S::kGpn, S::kP, 8 * 4096, 1};
  s.stream("compute");
  s.stream("comm");
  s.stream("d2h");
  s.stream("h2d");
  s.stream("cpu");
  const int world = s.group({"world", S::kN, S::kGpn, 1});
  s.add(alloc_op("params", Tier::gpu, MemCategory::params, S::kParamShard, "", Phase::init));
  s.add(alloc_op("grads", Tier::gpu, MemCategory::grads, S::kGradShard, "", Phase::init));
  s.add(alloc_op("optimizer", optimizer_on, MemCategory::optimizer, S::kOptShard, "", Phase::init));
  Op act[2];
  for (int l = 0; l < 2; ++l) {
    const std::string L = std::to_string(l);
    const Op g = alloc_op("gathered.L" + L, Tier::gpu, MemCategory::buffers, S::kLayer, "gathered");
    s.add(g);
    s.add(collective_op("fwd.L" + L + ".all_gather", Phase::forward, CollectiveKind::all_gather, world, S::kLayer));
    s.add(compute_op("fwd.L" + L, Phase::forward, ComputeKind::forward));
    act[l] = alloc_op("act.L" + L, Tier::gpu, MemCategory::activations, S::kAct);
    s.add(act[l]);
    s.add(free_op(g));
  }
  for (int l = 1; l >= 0; --l) {
    const std::string L = std::to_string(l);
    const Op g = alloc_op("gathered.L" + L, Tier::gpu, MemCategory::buffers, S::kLayer, "gathered", Phase::backward);
    s.add(g);
    s.add(collective_op("bwd.L" + L + ".all_gather", Phase::backward, CollectiveKind::all_gather, world, S::kLayer));
    s.add(compute_op("bwd.L" + L, Phase::backward, ComputeKind::backward));
    const Op b = alloc_op("bucket.L" + L, Tier::gpu, MemCategory::buffers, S::kLayer, "bucket", Phase::backward);
    s.add(b);
    s.add(collective_op("bwd.L" + L + ".reduce_scatter", Phase::backward, CollectiveKind::reduce_scatter, world,
                        S::kLayer));
    Op fa = free_op(act[l]);
    fa.phase = Phase::backward;
    s.add(fa);
    s.add(free_op(g));
    s.add(free_op(b));
  }
  s.add(copy_op("step.grads.d2h", Phase::step, CopyKind::d2h, S::kGradShard));
  Op swap;
  if (optimizer_on == Tier::nvme) {
    swap = alloc_op("swap", Tier::cpu, MemCategory::buffers, S::kSwap, "swap", Phase::step);
    s.add(swap);
    s.add(copy_op("step.opt.nvme_read", Phase::step, CopyKind::nvme_read, S::kOptShard));
  }
  Op opt = compute_op("step.cpu_adam", Phase::step, ComputeKind::optimizer);
  opt.compute.device = Device::cpu;
  opt.compute.elements = S::kP / S::kN;
  s.add(opt);
  if (optimizer_on == Tier::nvme) {
    s.add(copy_op("step.opt.nvme_write", Phase::step, CopyKind::nvme_write, S::kOptShard));
    s.add(free_op(swap));
  }
  s.add(copy_op("step.params.h2d", Phase::step, CopyKind::h2d, S::kParamShard));
  return s;
}

}  // namespace zsim::testing
