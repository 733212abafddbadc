// Where each model tensor lives inside the schedule's flat buffers (schedule version 2 `uses`): the
// whole-model 16-bit buffers of stages 0-2 (`params`, `grads`), a stage-3 unit's gathered buffer, and the
// stage-3 `params.persistent` buffer; and the model description a runtime builds its layers from.
#pragma once
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/schedule/schedule.hpp"

namespace zsim {

// Offsets in elements, indexed [unit][tensor] as Plan::units[u].tensors. -1 where the tensor is not there.
struct TensorLayout {
  std::vector<std::vector<Elements>> flat;        // whole model, units in forward order, tensors in unit order
  std::vector<std::vector<Elements>> gathered;    // stage 3: in the unit's gathered buffer (its gathered tensors in order)
  std::vector<std::vector<Elements>> persistent;  // stage 3: in params.persistent (units in order, persistent tensors)
  // Stage 3: the tensor's slice of this rank's partition (every tensor, units and tensors in model order,
  // ceil(numel / dp) elements each, DeepSpeed's ds_tensor): params.partition, grads.partition and the optimizer
  // state share this layout.
  std::vector<std::vector<Elements>> partition;
};

// Stage 3: a tensor's partition, DeepSpeed's ds_tensor.ds_numel (its numel padded to a multiple of dp, over dp).
inline Elements partition_numel(Elements numel, int dp) { return (numel + dp - 1) / dp; }

TensorLayout tensor_layout(const Plan& p);

// The model as the schedule carries it: shapes, training dtype, and the plan's units with their tensors.
ScheduleModel schedule_model(const Scenario& s, const Plan& p);

}  // namespace zsim
