#include "sim/plan/deepspeed_step_kernels.hpp"

namespace zsim {

namespace {

constexpr Bytes kFp32 = 4, kFp64 = 8;

// stage_1_and_2.py step with the optimizer on the GPU.
Bytes zero12_step(Bytes e) {
  const Bytes norm = (e + kFp64) + kFp64;   // g.double(), torch.norm
  const Bytes flatten = 2 * e + (e + kFp32);  // torch.cat, .to(fp32)
  const Bytes unscale = 2 * kFp32;            // mul_ in place
  const Bytes write_back = kFp32 + e;         // bit16 partition .copy_(fp32)
  return norm + flatten + unscale + write_back;
}

// bf16_optimizer.py step.
Bytes bf16_optimizer_step(Bytes e) {
  const Bytes norm = kFp32;              // the fp32 gradients' norm, no copy
  const Bytes write_back = kFp32 + e;    // update_lp_params
  const Bytes clear = kFp32;             // clear_hp_grads
  return norm + write_back + clear;
}

// stage3.py step with the optimizer on the GPU.
Bytes zero3_step(Bytes e, bool params_on_cpu) {
  const Bytes norm = (e + kFp64) + kFp64;                // g.double(), .norm(2)
  const Bytes unscale = 2 * kFp32;                       // mul_ in place
  const Bytes write_back = params_on_cpu ? 0 : kFp32 + e;  // the 16-bit flat partition .copy_(fp32)
  return norm + unscale + write_back;
}

}  // namespace

Bytes deepspeed_step_extra_bytes_per_param(const DeepSpeedStep& step, Bytes dtype_bytes) {
  if (step.optimizer_on_cpu) return 0;
  if (step.stage == 1 || step.stage == 2) return zero12_step(dtype_bytes);
  if (step.stage == 3) return zero3_step(dtype_bytes, step.params_on_cpu);
  if (step.stage == 0 && step.bf16_optimizer) return bf16_optimizer_step(dtype_bytes);
  return 0;
}

}  // namespace zsim
