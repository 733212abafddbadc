// Test helpers: a small cluster and a builder of hand-made schedules (not the real plan builder).
#pragma once
#include <string>
#include <vector>

#include "sim/schedule/schedule.hpp"
#include "sim/scenario/scenario.hpp"

namespace zsim::testing {

inline ClusterSpec test_cluster(int nodes, int gpus) {
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = gpus;
  c.gpu = {"test", 80 * kGiB, 3000, 1000, 60};
  c.host = {2048 * kGiB, 64};
  c.nvme = {30'000 * kGiB, 24, 12};
  c.links.nvlink_GBps = 400;
  c.links.pcie_GBps = 50;
  c.links.ib_GBps = 40;
  c.links.nvlink_latency_us = 2;
  c.links.pcie_latency_us = 3;
  c.links.ib_latency_us = 6;
  c.efficiency = {0.5, 0.8, 1e8, 0.5};
  return c;
}

class ScheduleBuilder {
 public:
  explicit ScheduleBuilder(const ClusterSpec& c, int steps = 1) {
    s.meta.world_size = c.world_size();
    s.meta.nodes = c.nodes;
    s.meta.gpus_per_node = c.gpus_per_node;
    s.meta.steps = steps;
  }

  int group(const std::string& name, int size, int ranks_per_node, int stride = 1) {
    return s.group(ProcessGroup{name, size, ranks_per_node, stride});
  }

  OpId compute(const std::string& name, Phase phase, Flops flops, std::vector<OpId> deps = {},
               const std::string& stream = "compute", ComputeKind what = ComputeKind::forward) {
    Op op = base(name, OpKind::compute, phase, stream, deps);
    op.compute.what = what;
    op.compute.flops = flops;
    return s.add(std::move(op));
  }

  OpId collective(const std::string& name, Phase phase, CollectiveKind what, int group, Bytes bytes,
                  std::vector<OpId> deps = {}, const std::string& stream = "comm") {
    Op op = base(name, OpKind::collective, phase, stream, deps);
    op.collective.what = what;
    op.collective.group = group;
    op.collective.bytes = bytes;
    return s.add(std::move(op));
  }

  OpId copy(const std::string& name, Phase phase, CopyKind what, Bytes bytes, bool pinned = true,
            std::vector<OpId> deps = {}, const std::string& stream = "") {
    Op op = base(name, OpKind::copy, phase, stream.empty() ? default_stream(what) : stream, deps);
    op.copy.what = what;
    op.copy.bytes = bytes;
    op.copy.pinned = pinned;
    return s.add(std::move(op));
  }

  OpId cpu_adam(const std::string& name, Elements params, std::vector<OpId> deps = {}) {
    Op op = base(name, OpKind::compute, Phase::step, "cpu", deps);
    op.compute.what = ComputeKind::optimizer;
    op.compute.device = Device::cpu;
    op.compute.elements = params;
    return s.add(std::move(op));
  }

  Schedule s;

 private:
  static std::string default_stream(CopyKind k) {
    switch (k) {
      case CopyKind::h2d: return "h2d";
      case CopyKind::d2h: return "d2h";
      default: return "nvme";
    }
  }
  Op base(const std::string& name, OpKind kind, Phase phase, const std::string& stream, std::vector<OpId> deps) {
    Op op;
    op.name = name;
    op.kind = kind;
    op.phase = phase;
    op.stream = s.stream(stream);
    op.deps = std::move(deps);
    return op;
  }
};

}  // namespace zsim::testing
