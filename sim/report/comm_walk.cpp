#include "sim/report/comm_walk.hpp"

#include <map>
#include <stdexcept>
#include <vector>
#include <tuple>

#include "sim/report/comm_volume.hpp"

namespace zsim {

Bytes& PhaseBytes::at(Phase p) {
  switch (p) {
    case Phase::init: return init;
    case Phase::forward: return forward;
    case Phase::backward: return backward;
    case Phase::step: return step;
  }
  return init;
}

Bytes PhaseBytes::at(Phase p) const { return const_cast<PhaseBytes&>(*this).at(p); }

namespace {

// Init (one-time setup) stays whole; the step phases are averaged over the steps.
PhaseBytes per_step(PhaseBytes b, int steps) {
  for (Phase p : {Phase::forward, Phase::backward, Phase::step}) b.at(p) /= steps;
  return b;
}

PhaseBytes& copy_bucket(CommWalk& w, CopyKind k) {
  switch (k) {
    case CopyKind::h2d: return w.h2d;
    case CopyKind::d2h: return w.d2h;
    case CopyKind::nvme_read: return w.nvme_read;
    case CopyKind::nvme_write: return w.nvme_write;
    case CopyKind::d2d: return w.d2d;
  }
  return w.h2d;
}

}  // namespace

CommWalk walk_comm(const Schedule& s) {
  CommWalk w;
  w.steps = s.meta.steps < 1 ? 1 : s.meta.steps;
  w.gpus_per_node = s.meta.gpus_per_node < 1 ? 1 : s.meta.gpus_per_node;
  // Collectives are summed per (phase, kind, group name, group size, bytes). Groups alike in name and size
  // share one id (the first such group's index), so integer keys stand for (name, size).
  std::vector<int> group_id(s.groups.size());
  for (size_t i = 0; i < s.groups.size(); ++i) {
    group_id[i] = static_cast<int>(i);
    for (size_t j = 0; j < i; ++j)
      if (s.groups[j].name == s.groups[i].name && s.groups[j].size == s.groups[i].size) {
        group_id[i] = group_id[j];
        break;
      }
  }
  using Key = std::tuple<Phase, CollectiveKind, int, Bytes>;
  std::map<Key, size_t> index;
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::copy) {
      // A copy that one rank runs adds to the per-GPU average a world_size-th of its bytes.
      const Bytes world = s.meta.world_size < 1 ? 1 : s.meta.world_size;
      copy_bucket(w, op.copy.what).at(op.phase) += op.copy.rank >= 0 ? op.copy.bytes / world : op.copy.bytes;
      continue;
    }
    if (op.kind != OpKind::collective) continue;
    const CollectiveOp& c = op.collective;
    if (c.group < 0 || c.group >= static_cast<int>(s.groups.size()))
      throw std::logic_error("comm walk: op " + std::to_string(op.id) + " names no valid group");
    const ProcessGroup& g = s.groups[c.group];
    const Bytes sent = bytes_sent_per_gpu(c.what, c.bytes, g.size);
    const Bytes cross = cross_node_bytes_per_gpu(c.what, c.bytes, g);
    w.per_gpu.at(op.phase) += sent;
    w.scale_per_gpu.at(op.phase) += bytes_sent_per_gpu(c.what, c.scale_bytes, g.size);
    w.cross_node_per_gpu.at(op.phase) += cross;
    w.cross_node_scale_per_gpu.at(op.phase) += cross_node_bytes_per_gpu(c.what, c.scale_bytes, g);

    const Key key{op.phase, c.what, group_id[c.group], c.bytes};
    auto [it, fresh] = index.emplace(key, w.collectives.size());
    if (fresh) w.collectives.push_back({op.phase, c.what, g.name, g.size, c.bytes, c.scale_bytes, 0, 0, 0});
    CollectiveSummary& sum = w.collectives[it->second];
    sum.count += 1;
    sum.bytes_per_gpu += sent;
    sum.cross_node_bytes_per_gpu += cross;
  }
  if (w.steps > 1) {
    for (PhaseBytes* b : {&w.per_gpu, &w.scale_per_gpu, &w.cross_node_per_gpu, &w.cross_node_scale_per_gpu,
                          &w.h2d, &w.d2h, &w.nvme_read, &w.nvme_write, &w.d2d})
      *b = per_step(*b, w.steps);
    for (CollectiveSummary& c : w.collectives) {
      if (c.phase == Phase::init) continue;
      c.count /= w.steps;
      c.bytes_per_gpu /= w.steps;
      c.cross_node_bytes_per_gpu /= w.steps;
    }
  }
  return w;
}

}  // namespace zsim
