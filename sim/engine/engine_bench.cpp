// zsim_engine_bench: times simulate() + summarize() on a synthetic ZeRO-3 schedule shaped like GPT-3 175B
// (96 layers, hidden 12288, seq 2048) on N nodes x 8 GPUs: per layer forward all-gather -> forward; backward
// all-gather -> recompute -> backward -> reduce-scatter on a second stream; one optimizer op.
// Prints wall time, peak RSS, simulated ops per second and the predicted step. Hand-built (not the plan
// builder's schedule); the full-pipeline benchmark belongs to the sweep/benchmark work.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "sim/engine/simulate.hpp"
#include "sim/engine/timing_report.hpp"
#include "sim/engine/timing_report_io.hpp"

using namespace zsim;

namespace {

ClusterSpec h100(int nodes) {
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.gpu = {"h100-80gb", 80 * kGiB, 3350, 989, 67};
  c.host = {2048 * kGiB, 112};
  c.nvme = {30'000'000'000'000, 25, 12};
  c.links = {370, 55, 46, 2, 2, 5, 1.0, 32};
  c.efficiency = {0.55, 0.85, 1e8, 0.5};
  return c;
}

Schedule gpt3_zero3(const ClusterSpec& c, int layers, int micro_steps, int steps) {
  const double h = 12288, s = 2048, b = 1;
  const double layer_params = 12 * h * h;
  const double fwd_flops = 2 * b * s * layer_params + 4 * b * s * s * h;
  const Bytes gathered = static_cast<Bytes>(2 * layer_params);  // bf16
  Schedule sch;
  sch.meta = {"synthetic gpt3-175b zero-3", c.world_size(), c.nodes, c.gpus_per_node,
              static_cast<Elements>(layer_params * layers), static_cast<std::int64_t>(s * b * micro_steps) * c.world_size(), steps};
  const int comp = sch.stream("compute"), comm = sch.stream("comm"), comm_rs = sch.stream("comm_rs");
  const int world = sch.group({"world", c.world_size(), c.gpus_per_node, 1});
  auto add = [&](OpKind kind, const char* name, Phase ph, int stream, std::vector<OpId> deps) {
    Op op;
    op.kind = kind;
    op.name = name;
    op.phase = ph;
    op.stream = stream;
    op.deps = std::move(deps);
    return op;
  };
  OpId last_opt = -1;
  for (int st = 0; st < steps; ++st) {
    OpId prev = last_opt;
    for (int m = 0; m < micro_steps; ++m) {
      for (int l = 0; l < layers; ++l) {
        Op ag = add(OpKind::collective, "fwd.all_gather", Phase::forward, comm, {});
        if (prev >= 0 && l == 0 && m == 0) ag.deps.push_back(prev);
        ag.collective = {CollectiveKind::all_gather, world, gathered, 0, DType::bf16};
        const OpId a = sch.add(std::move(ag));
        Op f = add(OpKind::compute, "fwd", Phase::forward, comp, {a});
        f.compute.flops = fwd_flops;
        prev = sch.add(std::move(f));
      }
      for (int l = layers - 1; l >= 0; --l) {
        Op ag = add(OpKind::collective, "bwd.all_gather", Phase::backward, comm, {});
        ag.collective = {CollectiveKind::all_gather, world, gathered, 0, DType::bf16};
        const OpId a = sch.add(std::move(ag));
        Op r = add(OpKind::compute, "recompute", Phase::backward, comp, {a, prev});
        r.compute = {ComputeKind::recompute, Device::gpu, fwd_flops, 0, 0};
        const OpId rc = sch.add(std::move(r));
        Op bw = add(OpKind::compute, "bwd", Phase::backward, comp, {rc});
        bw.compute = {ComputeKind::backward, Device::gpu, 2 * fwd_flops, 0, 0};
        prev = sch.add(std::move(bw));
        Op rs = add(OpKind::collective, "bwd.reduce_scatter", Phase::backward, comm_rs, {prev});
        rs.collective = {CollectiveKind::reduce_scatter, world, gathered, 0, DType::bf16};
        sch.add(std::move(rs));
      }
    }
    Op opt = add(OpKind::compute, "adam", Phase::step, comp, {static_cast<OpId>(sch.ops.size() - 1)});
    const double shard = layer_params * layers / c.world_size();
    opt.compute = {ComputeKind::optimizer, Device::gpu, 0, static_cast<Bytes>(shard * 32), static_cast<Elements>(shard)};
    last_opt = sch.add(std::move(opt));
  }
  return sch;
}

}  // namespace

int main(int argc, char** argv) {
  const int nodes = argc > 1 ? std::atoi(argv[1]) : 128;
  const int micro = argc > 2 ? std::atoi(argv[2]) : 1;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 1;
  const int repeat = argc > 4 ? std::atoi(argv[4]) : 5;
  const ClusterSpec c = h100(nodes);
  const auto t0 = std::chrono::steady_clock::now();
  const Schedule s = gpt3_zero3(c, 96, micro, steps);
  const auto t1 = std::chrono::steady_clock::now();
  TimingResult r;
  TimingReport rep;
  for (int i = 0; i < repeat; ++i) {
    r = simulate(c, s);
    rep = summarize(s, r);
  }
  const auto t2 = std::chrono::steady_clock::now();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double build_s = std::chrono::duration<double>(t1 - t0).count();
  const double sim_s = std::chrono::duration<double>(t2 - t1).count() / repeat;
  std::printf("schedule: %zu ops, %d nodes x 8 GPUs, %d micro-steps, %d steps (built in %.3f s)\n", s.ops.size(), nodes,
              micro, steps, build_s);
  std::printf("simulate+summarize: %.4f s wall per run (mean of %d), %.0f ops/s, %lld events, peak RSS %.1f MiB\n",
              sim_s, repeat, s.ops.size() / sim_s, static_cast<long long>(r.events), ru.ru_maxrss / 1024.0);
  std::printf("%s", format_timing(rep).c_str());
  return 0;
}
