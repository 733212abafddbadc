#include "runtime/model/activation_buffers.hpp"

namespace zrun::model {

zsim::Bytes needed_activation_bytes(const ActivationLayout& l, bool checkpointing, const zsim::MemOp& m) {
  if (m.category != zsim::MemCategory::activations) return m.bytes;
  if (m.detail.empty()) return l.layer_bytes(checkpointing);
  if (m.detail == "recompute" || m.detail == "forward_work") return l.work_bytes();
  if (m.detail == "grad") return l.grad_bytes();
  if (m.detail == "logits") return l.head_bytes();
  return m.bytes;
}

OwnActivationBytes own_activation_bytes(const zsim::Schedule& s, const ActivationLayout& l, bool checkpointing) {
  bool grad = false, forward_work = false;
  for (const zsim::Op& op : s.ops) {
    if (op.kind != zsim::OpKind::alloc || op.mem.category != zsim::MemCategory::activations) continue;
    grad |= op.mem.detail == "grad";
    forward_work |= op.mem.detail == "forward_work";
  }
  OwnActivationBytes own;
  if (!grad) own.grad_bytes = l.grad_bytes();
  if (checkpointing && !forward_work) own.forward_work_bytes = l.work_bytes();
  return own;
}

}  // namespace zrun::model
