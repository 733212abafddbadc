// zrun's side of the schedule's activation buffers (host code: the executor's sizing, tested in CI). What the
// model needs in each activation buffer a schedule allocates (by the buffer's detail), and what the executor
// allocates for activations itself where the schedule has no buffer for them.
#pragma once
#include "runtime/model/activation_layout.hpp"
#include "sim/schedule/schedule.hpp"

namespace zrun::model {

// The bytes the model needs in the buffer of an alloc: for category `activations`, by its detail,
//   ""             a layer's activations: layer_bytes(checkpointing)
//   "recompute"    the recompute working set: work_bytes()
//   "forward_work" checkpointing: the working set of a layer's forward: work_bytes()
//   "grad"         the backward's activation gradients: grad_bytes()
//   "logits"       the head's activations: head_bytes()
// Anything else (another category, an unknown detail): the schedule's own bytes.
zsim::Bytes needed_activation_bytes(const ActivationLayout& l, bool checkpointing, const zsim::MemOp& m);

// What the executor allocates for activations beyond the schedule, for a whole run: the backward's activation
// gradients (grad_bytes()) when the schedule has no `grad` activation buffer, and under checkpointing a layer's
// forward working set (work_bytes()) when it has no `forward_work` buffer (schedules written before zsim
// allocated them, read with --schedule). 0 where the schedule has the buffer.
struct OwnActivationBytes {
  zsim::Bytes grad_bytes = 0;
  zsim::Bytes forward_work_bytes = 0;
  zsim::Bytes total() const { return grad_bytes + forward_work_bytes; }
};
OwnActivationBytes own_activation_bytes(const zsim::Schedule& s, const ActivationLayout& l, bool checkpointing);

}  // namespace zrun::model
