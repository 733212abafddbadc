#include "sim/plan/offload_uses.hpp"

namespace zsim {

void use_cpu_adam(Op& adam, BufferUse grads, BufferUse state, BufferUse weights) {
  grads.role = Role::grad;
  grads.access = Access::read;
  adam.uses.push_back(grads);
  state.role = Role::state;
  state.access = Access::read_write;
  adam.uses.push_back(state);
  weights.role = Role::param;
  weights.access = Access::write;
  adam.uses.push_back(weights);
}

void use_copy(Op& copy, BufferUse in, BufferUse out) {
  in.role = Role::input;
  in.access = Access::read;
  out.role = Role::output;
  out.access = Access::write;
  copy.uses.push_back(in);
  copy.uses.push_back(out);
}

BufferUse whole(const Op& alloc, Role role, Access access) { return {alloc.id, 0, alloc.mem.bytes, role, access}; }

}  // namespace zsim
