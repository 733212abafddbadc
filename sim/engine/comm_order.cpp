#include "sim/engine/comm_order.hpp"

#include <algorithm>

namespace zsim {

std::vector<OpId> communicator_order_deps(const Schedule& s) {
  std::vector<OpId> prev(s.ops.size(), -1), last(s.groups.size(), -1);
  for (const Op& op : s.ops) {
    if (op.kind != OpKind::collective || s.groups.at(op.collective.group).size < 2) continue;
    OpId& before = last.at(op.collective.group);
    if (before >= 0 && s.ops[before].stream != op.stream &&
        std::find(op.deps.begin(), op.deps.end(), before) == op.deps.end())
      prev[op.id] = before;
    before = op.id;
  }
  return prev;
}

}  // namespace zsim
