// `zsim advise`: the search for a DeepSpeed configuration (issue 41), without the pipeline. The candidates are
// scenario overrides (the sweep's points); the command line (sim/cli/advise_command.cpp) evaluates them with
// evaluate_sweep_point on the sweep's thread pool and hands the figures back here to prune, rank and explain.
// Pure: nothing here plans, simulates or writes files.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/common/units.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/sweep/sweep.hpp"

namespace zsim {

// One configuration: what the search varies. Everything else stays as the scenario has it.
struct AdviseCandidate {
  int stage = 3;
  std::int64_t micro_batch = 1;
  std::int64_t grad_accum = 1;
  bool checkpointing = true;
  OffloadDevice offload_optimizer = OffloadDevice::none;
  OffloadDevice offload_param = OffloadDevice::none;  // stage 3 only
  bool qwz = false, hpz = false, qgz = false;         // ZeRO++ (stage 3, more than one node)
  // 0 = as the scenario has it.
  Elements reduce_bucket_size = 0;
  Elements prefetch_bucket_size = 0;   // stage 3
  Elements max_live_parameters = 0;    // stage 3
  // DeepSpeed's communication_data_type, the dtype of the gradient reductions; unset = as the scenario has it.
  std::optional<Precision> communication_data_type;
  bool operator==(const AdviseCandidate&) const = default;
};

// What the search may use: the scenario's world and its target batch.
struct AdviseSpace {
  int nodes = 1;
  int gpus_per_node = 1;
  int world = 1;                       // nodes x gpus_per_node: one rank reduces nothing
  bool has_nvme = false;               // cluster.nvme.bytes > 0
  std::int64_t batch_per_gpu = 1;      // micro_batch x grad_accum to keep (the global batch over the world)
  std::int64_t max_micro_batch = 64;   // micro-batches considered: the divisors of batch_per_gpu up to this
  // The values each bucket size takes in the second round (one key at a time, around the best structures).
  std::vector<Elements> reduce_bucket_sizes{50'000'000, 200'000'000, 500'000'000};
  std::vector<Elements> prefetch_bucket_sizes{50'000'000, 200'000'000, 500'000'000};
  std::vector<Elements> max_live_parameters{300'000'000, 1'000'000'000, 3'000'000'000};
  // The scenario's own values (a candidate's 0): a variant equal to them is the candidate itself.
  Elements scenario_reduce_bucket_size = 0, scenario_prefetch_bucket_size = 0, scenario_max_live_parameters = 0;
  // The gradient reductions' dtype as the scenario has it (its communication_data_type, else the training dtype,
  // DeepSpeed's default) and the values tried: the 16-bit dtype (the training one; bf16 under fp32 training)
  // and fp32.
  Precision scenario_communication_data_type = Precision::bf16;
  std::vector<Precision> communication_data_types{Precision::bf16, Precision::fp32};
};

AdviseSpace advise_space(const Scenario& s);

// The scenario's own configuration as a candidate (what the user runs).
AdviseCandidate candidate_of(const Scenario& s);

// The overrides ("KEY=V", --set syntax) that make the scenario run `c`. `gpus_per_node` is hpZ's partition size.
std::vector<std::string> candidate_overrides(const AdviseCandidate& c, int gpus_per_node);

// "stage 3, micro-batch 2 x 4, checkpointing, optimizer on cpu, qwZ+hpZ, reduce bucket 2e8" (what differs).
std::string describe(const AdviseCandidate& c);

// Offload levels, least first: how much leaves the GPU. The search tries a level only for structures whose lower
// levels do not fit (offloading is slower wherever the GPU holds the states: it moves them over PCIe).
struct OffloadLevel {
  OffloadDevice optimizer = OffloadDevice::none;
  OffloadDevice param = OffloadDevice::none;
};
std::vector<OffloadLevel> offload_levels(int stage, bool has_nvme);

// Round one: every structure (stage, micro-batch, checkpointing) at offload level `level`, without ZeRO++ and at
// the scenario's bucket sizes. Stages with fewer levels than `level` give none.
std::vector<AdviseCandidate> structures_at_level(const AdviseSpace& space, std::size_t level);

// Round two, one key at a time around the best structures: `c` with key 0 ZeRO++ (none, qwZ, hpZ, qgZ, qwZ+hpZ,
// all three; stage 3 on more than one node), 1 communication_data_type (more than one rank, and not where qgZ
// quantizes the gradients across nodes), 2 reduce bucket, 3 prefetch bucket, 4 max live parameters changed to
// each of the space's values; none for a key its stage does not read.
std::vector<AdviseCandidate> bucket_variants(const AdviseCandidate& c, const AdviseSpace& space, int key);
inline constexpr int kAdviseVariantKeys = 5;

// What a point needs of the GPU: what its verdict read (reserved + outside the allocator under runtime deepspeed),
// or its allocated peak where that is all it has.
Bytes gpu_need(const SweepPoint& p);

// A point that fits with the margin: every tier fits and what it needs of the GPU (gpu_need) leaves `margin` of the
// GPU's memory free.
bool fits_with_margin(const SweepPoint& p, Bytes gpu_capacity, double margin);

struct AdviseEntry {
  AdviseCandidate candidate;
  SweepPoint point;
};

// Fitting entries (with the margin), best first: tokens/s descending, ties in input order.
std::vector<std::size_t> rank_entries(const std::vector<AdviseEntry>& entries, Bytes gpu_capacity, double margin);

// The choices `c` makes otherwise than `own` (the user's configuration), in words: "stage 1", "micro-batch 2 x 4",
// "checkpointing", "optimizer on cpu", "qgZ", "reduce bucket 5e+07", ... A bucket size or reduction dtype a
// candidate leaves as the scenario has it (0, unset) is the scenario's value; keys its stage does not read are not
// compared (ZeRO++, prefetch and max live below stage 3, the reduce bucket at stage 0).
std::vector<std::string> changed_choices(const AdviseCandidate& c, const AdviseCandidate& own, const AdviseSpace& space);

// The advice among `ranked` (rank_entries: fitting, fastest first): of the entries within `tie` of the fastest's
// tokens/s (a predicted difference zsim's step-time error cannot tell apart), the one with the fewest changed
// choices from `own`, the faster of equals. Its position in `ranked`; tie 0 is the fastest (position 0).
std::size_t advised_position(const std::vector<AdviseEntry>& entries, const std::vector<std::size_t>& ranked,
                             const AdviseCandidate& own, const AdviseSpace& space, double tie);

// Where a fitting configuration's step goes (the timing report's split) and its memory.
struct AdviseBreakdown {
  Seconds step_s = 0;
  Seconds compute_s = 0;
  Seconds optimizer_s = 0;
  Seconds exposed_comm_s = 0;
  Seconds offload_s = 0;
  Seconds idle_s = 0;
  Bytes gpu_peak = 0;
  Bytes gpu_need = 0;      // reserved + outside the allocator where the point's verdict read it (gpu_need); 0: the peak
  Bytes gpu_capacity = 0;
};

// What binds: "compute 91%", "exposed communication 22%", "host / offload 40%", "memory headroom 3.1 GiB".
std::string binding(const AdviseBreakdown& b);

// Why `e` is advised (is_best: what binds) or not: its tokens/s beside the advised one's (faster or slower), the
// choices it makes otherwise (changed_choices against the advised one), what binds.
std::string reason(const AdviseEntry& e, const AdviseBreakdown& b, const AdviseEntry& best, const AdviseSpace& space,
                   bool is_best);

// What memory kept from the winner: the same configuration without checkpointing, with less offload, or at the next
// larger micro-batch, where the search tried it and it did not fit ("no checkpointing needs 97.1 GiB of 76.0 GiB
// usable"); "" when none of them was tried and refused.
std::string memory_limits(const std::vector<AdviseEntry>& entries, const AdviseCandidate& winner,
                          const AdviseSpace& space, Bytes gpu_capacity, double margin);

// Nothing fits: which evaluated point had the smallest GPU peak and how far it is from the memory (margin included).
std::string shortfall(const std::vector<AdviseEntry>& entries, Bytes gpu_capacity, double margin);

// The winner as a DeepSpeed config (DeepSpeed's keys, its zero_optimization block written out in full from the
// resolved scenario, so that zsim reads it back to the same configuration).
std::string ds_config_json(const Scenario& resolved);

}  // namespace zsim
