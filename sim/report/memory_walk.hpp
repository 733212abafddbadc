// Memory walk: replays the schedule's alloc/free ops in program order and reports, per tier, the live
// bytes by category, the peak, the op at the peak and whether it fits the tier's capacity.
// GPU figures are per GPU; CPU and NVMe figures are per NODE (per-rank bytes x gpus_per_node).
#pragma once
#include <map>
#include <optional>
#include <string>

#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

// Live bytes on one tier split by category; buffers further split by MemOp::detail.
struct MemoryBreakdown {
  Bytes params = 0;
  Bytes grads = 0;
  Bytes optimizer = 0;
  Bytes activations = 0;
  Bytes buffers = 0;
  std::map<std::string, Bytes> buffer_detail;  // "bucket", "prefetch", "gathered", "hpz", ...; "" -> "other"

  Bytes total() const { return params + grads + optimizer + activations + buffers; }
  Bytes of(MemCategory c) const;
  void add(MemCategory c, const std::string& detail, Bytes bytes);  // bytes < 0 releases
  bool operator==(const MemoryBreakdown&) const = default;
};

// Capacity of each tier: GPU per GPU, CPU and NVMe per node. 0 means the tier has none.
struct MemoryCapacity {
  Bytes gpu = 0;
  Bytes cpu = 0;
  Bytes nvme = 0;
  bool operator==(const MemoryCapacity&) const = default;
};
MemoryCapacity capacity_of(const Scenario& s);  // gpu.hbm_bytes, host.memory_bytes, nvme.bytes

struct TierMemory {
  explicit TierMemory(Tier t = Tier::gpu) : tier(t) {}

  Tier tier;
  Bytes capacity = 0;
  Bytes peak = 0;              // the most bytes live at once (after an op), over the whole program
  OpId peak_op = -1;           // first op after which `peak` bytes are live; -1 if the tier is never used
  std::string peak_op_name;
  MemoryBreakdown at_peak;     // what is live right after peak_op; at_peak.total() == peak
  MemoryBreakdown at_end;      // what is still live after the last op (persistent states)
  // GPU under runtime deepspeed: what PyTorch's caching allocator reserves from the driver at most while the schedule
  // runs (reserved_walk.hpp); 0 where not modelled (zrun's arena, CPU and NVMe).
  Bytes reserved = 0;
  // GPU under runtime deepspeed: what the process holds outside the allocator (the CUDA context, libraries' handles,
  // NCCL: cluster.efficiency.outside_allocator_bytes); 0 where not modelled.
  Bytes outside_allocator = 0;
  // outside_allocator is zsim's default for a DeepSpeed process (kDeepSpeedOutsideAllocatorDefaultBytes): no profile
  // or scenario gave the figure.
  bool outside_allocator_default = false;

  // What the verdict compares with the capacity: what can run out. Where the allocator is modelled (reserved > 0),
  // its reserved peak plus what lies outside it; else the peak (zrun's arena, CPU, NVMe).
  Bytes verdict_bytes() const { return reserved > 0 ? reserved + outside_allocator : peak; }
  bool fits() const { return verdict_bytes() <= capacity; }
  Bytes headroom() const { return capacity - verdict_bytes(); }  // negative: overflow by -headroom()
};

// The first op in program order after which some tier holds more than its capacity (ties at one op:
// gpu, then cpu, then nvme). `over_by` is that tier's live - capacity at that op; the tier's worst
// overflow is its TierMemory::peak - capacity.
struct MemoryOverflow {
  Tier tier = Tier::gpu;
  OpId op = -1;
  std::string op_name;
  Bytes live = 0;
  Bytes capacity = 0;
  Bytes over_by = 0;
};

struct MemoryWalk {
  TierMemory gpu{Tier::gpu};
  TierMemory cpu{Tier::cpu};
  TierMemory nvme{Tier::nvme};
  std::optional<MemoryOverflow> first_overflow;

  bool fits() const { return gpu.fits() && cpu.fits() && nvme.fits(); }
  const TierMemory& tier(Tier t) const;
};

// Walks s.ops in program order (the order a single stream would run them; concurrent streams are not
// interleaved differently). Throws std::logic_error on a free without a matching live alloc.
MemoryWalk walk_memory(const Schedule& s, const MemoryCapacity& capacity);

// Each category's own peak on `tier` over program order, for one rank (not scaled to a node): what zrun's memory
// accounting measures per category (runtime/memory/memory_accounting.hpp). Categories never allocated are absent.
std::map<MemCategory, Bytes> category_peaks(const Schedule& s, Tier tier);

// What is live on `tier` right after op `after` (same units as the walk: GPU per GPU, CPU/NVMe per node).
MemoryBreakdown live_after(const Schedule& s, OpId after, Tier tier);

}  // namespace zsim
