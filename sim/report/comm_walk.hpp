// Communication walk: sums, over the schedule's collective and copy ops, the bytes each GPU sends per
// phase, the part that crosses node boundaries, and a per-collective summary. All figures are per
// optimizer step (whole-schedule sums divided by meta.steps), except phase init, which happens once.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/common/units.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

// Bytes split by phase. total() is forward + backward + step; init (one-time setup) is kept apart.
struct PhaseBytes {
  Bytes init = 0;
  Bytes forward = 0;
  Bytes backward = 0;
  Bytes step = 0;

  Bytes total() const { return forward + backward + step; }
  Bytes& at(Phase p);
  Bytes at(Phase p) const;
  bool operator==(const PhaseBytes&) const = default;
};

// Collectives that share (phase, op, group name, group size, bytes), merged.
struct CollectiveSummary {
  Phase phase = Phase::forward;
  CollectiveKind op = CollectiveKind::all_gather;
  std::string group;
  int group_size = 1;
  Bytes bytes = 0;                     // nccl-tests size of ONE such collective
  Bytes scale_bytes = 0;               // quantization-scale part of `bytes`
  std::int64_t count = 0;              // how many per step
  Bytes bytes_per_gpu = 0;             // sent per GPU by all `count` of them
  Bytes cross_node_bytes_per_gpu = 0;  // of which crosses node boundaries, all `count` of them
};

struct CommWalk {
  int steps = 1;
  int gpus_per_node = 1;
  PhaseBytes per_gpu;                   // bytes sent per GPU (comm_volume.hpp: bytes_sent_per_gpu)
  PhaseBytes scale_per_gpu;             // of which quantization scales
  PhaseBytes cross_node_per_gpu;        // bytes per GPU crossing node boundaries
  PhaseBytes cross_node_scale_per_gpu;  // of which quantization scales
  std::vector<CollectiveSummary> collectives;  // in order of first appearance
  // Copies per GPU (per rank), by kind: host<->device over PCIe, NVMe traffic, and device-local copies (d2d:
  // the stage-3 coalesced fetch's flat buffer, the ZeRO-1/2 bucket flattening and copy-out; a copy run by one
  // rank only counts bytes / world_size).
  PhaseBytes h2d, d2h, nvme_read, nvme_write, d2d;

  Bytes cross_node_per_node_total() const { return cross_node_per_gpu.total() * gpus_per_node; }
};

// Throws std::logic_error on a collective whose group index is invalid.
CommWalk walk_comm(const Schedule& s);

}  // namespace zsim
