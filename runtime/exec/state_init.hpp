// ZeRO stage 3's states at the start of training on one rank, laid out as the schedule's init buffers say
// (sim/plan/tensor_layout.hpp): this rank's partition of every tensor (params.partition, training dtype), the persistent
// tensors whole (params.persistent), and per optimizer sub-group [fp32 master | exp_avg | exp_avg_sq] of the
// partition. Values come from the model's deterministic initialisation, so they do not depend on world size or stage.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/exec/device_buffers.hpp"
#include "runtime/model/model_config.hpp"
#include "sim/plan/plan.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun {

struct Stage3States {
  std::vector<float> partition;   // params.partition: every tensor's chunk of `rank`, zero-padded (values)
  std::vector<float> persistent;  // params.persistent: the persistent tensors whole (values)
  std::vector<float> optimizer;           // per sub-group: master, exp_avg (0), exp_avg_sq (0)
};

// Host images of the states (no device needed): what init_stage3_states copies.
Stage3States stage3_states(const zsim::Plan& plan, const model::ModelConfig& cfg, int rank);

// Copies `bytes` of host data into the buffer of init alloc `id`, whatever its tier (GPU, pinned host, NVMe file).
using PutState = std::function<void(zsim::OpId id, const void* data, std::size_t bytes)>;

// `values` in the training dtype's bytes (bf16 / fp16 rounded to nearest even, fp32 as is).
std::vector<std::byte> encode(const std::vector<float>& values, zsim::DType dtype);

// Refuses what zrun's stage 3 does not run yet (issue 14), then fills the init buffers of `init_ops`.
void init_stage3_states(const zsim::Schedule& s, const zsim::Plan& plan, const model::ModelConfig& cfg, int rank,
                        const std::vector<zsim::OpId>& init_ops, const PutState& put_state);

}  // namespace zrun
