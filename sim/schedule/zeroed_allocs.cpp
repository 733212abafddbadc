#include "sim/schedule/zeroed_allocs.hpp"

namespace zsim {

std::vector<char> zeroed_allocs(const Schedule& s) {
  std::vector<char> zero(s.ops.size(), 0);
  for (const Op& op : s.ops) {
    if (op.kind == OpKind::alloc && op.mem.tier == Tier::gpu &&
        (op.mem.category == MemCategory::grads || op.mem.detail == "bucket" || op.mem.detail == "interleave"))
      zero[op.id] = 1;
    if (op.kind == OpKind::collective && op.collective.what == CollectiveKind::all_reduce)
      for (const BufferUse& u : op.uses)
        if (u.role == Role::param) {  // the op's first parameter use
          if (u.alloc >= 0 && u.alloc < static_cast<OpId>(s.ops.size()) && s.ops[u.alloc].mem.tier == Tier::gpu)
            zero[u.alloc] = 1;
          break;
        }
  }
  return zero;
}

}  // namespace zsim
