// Version-2 `uses` of ZeRO-Offload's ops (docs/schedule-format.md, "Offload"): the reduced 16-bit gradient chunks
// copied down into the CPU optimizer's fp32 gradients, the CPU Adam of one sub-group, the NVMe swaps of its state and
// the copy of its updated 16-bit weights back to the GPU. The schedule builder calls these where it emits the ops.
#pragma once
#include <vector>

#include "sim/schedule/schedule.hpp"

namespace zsim {

// One tensor's reduced gradient on this rank: `bytes` 16-bit bytes at `from` in the reduction's buffer (plus the
// rank's index x rank_stride), added as fp32 at `to` in grads.fp32.
struct GradChunk {
  int unit = -1, tensor = -1;
  Bytes from = 0, bytes = 0, to = 0;
};

// A d2h copy of reduced chunks: per chunk one `input` (elements of `elem_bytes`, in `source`) and one `output` (the
// same elements in fp32: `write` at the step's first copy of them, `read_write` when `accumulate`: added to what the
// micro-steps before left there).
void use_grad_chunks_to_cpu(Op& copy, OpId source, Bytes rank_stride, const std::vector<GradChunk>& chunks,
                            OpId grads_fp32, Bytes elem_bytes, bool accumulate);

// CPU Adam of one sub-group of n elements: fp32 gradients from element `first` of grads.fp32, the sub-group's state
// ([master | exp_avg | exp_avg_sq], 12 bytes per element, read_write) and its 16-bit weights out.
void use_cpu_adam(Op& adam, OpId grads_fp32, Elements first, Elements n, BufferUse state, BufferUse weights);

// A plain copy: one input range, one output range of the same bytes.
void use_copy(Op& copy, BufferUse in, BufferUse out);

// A whole-buffer range of the alloc op `alloc`.
BufferUse whole(const Op& alloc, Role role, Access access);

}  // namespace zsim
