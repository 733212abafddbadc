#include "sim/plan/offload_uses.hpp"

namespace zsim {

void use_grad_chunks_to_cpu(Op& copy, OpId source, Bytes rank_stride, const std::vector<GradChunk>& chunks,
                            OpId grads_fp32, Bytes elem_bytes, bool accumulate) {
  for (const GradChunk& c : chunks) {
    BufferUse in{source, c.from, c.bytes, Role::input, Access::read, c.unit, c.tensor};
    in.rank_stride = rank_stride;
    copy.uses.push_back(in);
    // The same elements in fp32 (16-bit training: twice the input's bytes; the runtime converts and adds).
    copy.uses.push_back({grads_fp32, c.to, 4 * (c.bytes / elem_bytes), Role::output,
                         accumulate ? Access::read_write : Access::write, c.unit, c.tensor});
  }
}

void use_cpu_adam(Op& adam, OpId grads_fp32, Elements first, Elements n, BufferUse state, BufferUse weights) {
  adam.uses.push_back({grads_fp32, 4 * first, 4 * n, Role::grad, Access::read});
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
