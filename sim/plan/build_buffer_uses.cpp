// The schedule builder's buffer uses (schema version 2): which bytes of which buffers an op reads and writes.
#include "sim/plan/schedule_builder_state.hpp"

namespace zsim::build {

void Builder::use(OpId op, OpId buffer, Bytes offset, Bytes bytes, Role role, Access access, int unit, int tensor) {
  sch_.ops[op].uses.push_back({buffer, offset, bytes, role, access, unit, tensor});
}

// The weights of unit u: the whole-model buffer (stages 0-2), or its gathered buffer and the persistent one.
void Builder::use_params(OpId op, int u) {
  const auto& ts = p_.units[u].tensors;
  size_t gathered = 0;
  for (int k = 0; k < static_cast<int>(ts.size()); ++k) {
    const Bytes bytes = e_ * ts[k].numel();
    if (p_.stage < 3) {
      use(op, params_, e_ * flat_offset(u, k), bytes, Role::param, Access::read, u, k);
    } else if (layout_.gathered[u][k] >= 0) {
      const auto [buffer, offset] = live_.at(u).where.at(gathered++);
      use(op, buffer, offset, bytes, Role::param, Access::read, u, k);
    } else {
      use(op, persistent_, e_ * layout_.persistent[u][k], bytes, Role::param, Access::read, u, k);
    }
  }
}

// The gradients a backward segment of unit u produces: its tensors in bucket b, in the whole-model gradient
// buffer (stages 0-1, accumulated) or at their place in the bucket's buffer (stages 2-3).
void Builder::use_grads(OpId op, int u, size_t b) {
  if (b >= p_.buckets.size()) return;
  Elements offset = 0;
  for (size_t i = 0; i < p_.buckets[b].members.size(); ++i) {
    const auto [mu, k] = p_.buckets[b].members[i];
    const Elements n = p_.buckets[b].tensors[i].numel();
    if (mu == u) {
      if (p_.stage <= 1)
        use(op, grads_, e_ * flat_offset(u, k), e_ * n, Role::grad, Access::read_write, u, k);
      else
        use(op, open_.at(b), e_ * offset, e_ * n, Role::grad, Access::write, u, k);
    }
    offset += n;
  }
}

}  // namespace zsim::build
