// The schedule builder's optimizer-step collectives of DeepSpeed beyond the parameter gathers (runtime deepspeed).
#include "sim/plan/schedule_builder_state.hpp"

namespace zsim::build {

// step()'s gradient norm, all-reduced over the data-parallel group before the update, which waits for it:
// - stages 1-2: one fp32 scalar per parameter group (stage_1_and_2.py scaled_global_norm -> get_grad_norm_direct:
//   `total_norm = ...square().sum().float()`, or with the optimizer offloaded complete_grad_norm_calculation_for_
//   cpu_offload: `FloatTensor([float(total_norm)])`);
// - stage 3: one per sub-group (stage3.py _get_norm_groups over fp16_groups, one a sub-group), an fp64 scalar
//   (get_grad_norm_direct sums the norms in double) or, with the optimizer offloaded, an fp32 one
//   (complete_grad_norm_calculation_for_cpu_offload);
// - stage 0: none (BF16_Optimizer's get_global_norm_of_tensors reduces only over an mpu; the engine's own optimizers
//   take no norm).
// DeepSpeed issues them with one rank too. zsim plans one parameter group. Each scalar is a tiny buffer (`grad_norm`)
// reduced in place; the norm kernels that fill it (a cast to double and a norm per gradient tensor) have no op.
// Returns what the update waits for.
std::vector<OpId> Builder::grad_norm_all_reduces(const std::vector<OpId>& ready) {
  if (p_.runtime != RuntimeKind::deepspeed || p_.stage == 0) return ready;
  const bool fp64 = p_.stage == 3 && !optimizer_offloaded();
  const Bytes bytes = fp64 ? 8 : 4;
  const size_t n = p_.stage == 3 ? std::max<size_t>(1, p_.sub_groups.size()) : 1;
  std::vector<OpId> out;
  for (size_t g = 0; g < n; ++g) {
    const std::string name = "step.grad_norm" + (n > 1 ? std::to_string(g) : std::string());
    const OpId buf = alloc(name + ".s" + std::to_string(step_), Tier::gpu, MemCategory::buffers, "grad_norm", bytes,
                           Phase::step, comm_, ready);
    const OpId ar = collective(name + ".all_reduce", CollectiveKind::all_reduce, world_, bytes, 0,
                               fp64 ? DType::fp64 : DType::fp32, Phase::step, comm_, {buf}, -1);
    use(ar, buf, 0, bytes, Role::input, Access::read);
    use(ar, buf, 0, bytes, Role::output, Access::write);
    release(buf, Phase::step, comm_, {ar});
    out.push_back(ar);
  }
  return out;
}

}  // namespace zsim::build
