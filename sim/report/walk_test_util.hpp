// Helpers for hand-building small schedules in the report tests.
#pragma once
#include <string>

#include "sim/schedule/schedule.hpp"

namespace zsim::testing {

inline Op alloc_op(const std::string& buffer, Tier tier, MemCategory cat, Bytes bytes,
                   const std::string& detail = "", Phase phase = Phase::forward) {
  Op op;
  op.kind = OpKind::alloc;
  op.name = "alloc." + buffer;
  op.phase = phase;
  op.mem = {buffer, tier, cat, detail, bytes};
  return op;
}

inline Op free_op(const Op& alloc) {
  Op op = alloc;
  op.kind = OpKind::free;
  op.name = "free." + alloc.mem.buffer;
  return op;
}

inline Op collective_op(const std::string& name, Phase phase, CollectiveKind what, int group, Bytes bytes,
                        Bytes scale_bytes = 0, DType dtype = DType::bf16) {
  Op op;
  op.kind = OpKind::collective;
  op.name = name;
  op.phase = phase;
  op.stream = 1;
  op.collective = {what, group, bytes, scale_bytes, dtype};
  return op;
}

inline Op copy_op(const std::string& name, Phase phase, CopyKind what, Bytes bytes) {
  Op op;
  op.kind = OpKind::copy;
  op.name = name;
  op.phase = phase;
  op.copy = {what, bytes, true};
  return op;
}

inline Op compute_op(const std::string& name, Phase phase, ComputeKind what) {
  Op op;
  op.kind = OpKind::compute;
  op.name = name;
  op.phase = phase;
  op.compute.what = what;
  return op;
}

}  // namespace zsim::testing
