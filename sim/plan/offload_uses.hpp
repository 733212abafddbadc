// Version-2 `uses` of ZeRO-Offload's ops (docs/schedule-format.md, "Offload"): the CPU Adam of one sub-group, the
// NVMe swaps of its state and the copy of its updated 16-bit weights back to the GPU. The schedule builder calls these where it emits the ops.
#pragma once
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace zsim {

// CPU Adam of one sub-group: its fp32 gradients (in grads.fp32, or the swap buffer they were read into), its state
// ([master | exp_avg | exp_avg_sq], 12 bytes per element, read_write) and its 16-bit weights out.
void use_cpu_adam(Op& adam, BufferUse grads, BufferUse state, BufferUse weights);

// A plain copy: one input range, one output range of the same bytes.
void use_copy(Op& copy, BufferUse in, BufferUse out);

// A whole-buffer range of the alloc op `alloc`.
BufferUse whole(const Op& alloc, Role role, Access access);

}  // namespace zsim
