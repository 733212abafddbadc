// The GPU traffic of DeepSpeed 0.14.5's optimizer step beyond the fused Adam kernel (which the schedule prices as
// every runtime's: fp32 master, exp_avg, exp_avg_sq read and written, the gradient read, the 16-bit weight written),
// per parameter of the rank's partition, as its Python runs each op as a kernel of its own. Pure.
//
// e: the training dtype's bytes (bf16: 2); reads + writes.
//   stages 1-2, optimizer on the GPU (stage_1_and_2.py step):
//     scaled_global_norm -> get_grad_norm_direct: torch.norm(g.double()) per gradient: the float64 copy e + 8, its norm 8
//     flatten(averaged_gradients) (torch.cat) 2e, .to(fp32) e + 4
//     unscale_and_clip_grads: grad.mul_(1 / combined_scale), in place in fp32, whatever the scale: 8
//     bit16_partitions[...].data.copy_(fp32_partition): 4 + e                                  = 5e + 32 (42 at bf16)
//   stage 0 with bf16 (bf16_optimizer.py step):
//     get_global_norm_of_tensors over the fp32 gradients: t.float() (no copy) .norm: 4
//     update_lp_params: the 16-bit partition .copy_(fp32): 4 + e; clear_hp_grads: the fp32 gradients .zero_(): 4
//                                                                                                = e + 12 (14 at bf16)
//   stage 3, optimizer on the GPU (stage3.py step; its flatten and fp32 cast, _prepare_fp32_grad_for_sub_group, are
//   scheduled as copies of their own: build_optimizer_step.cpp):
//     _get_norm_groups -> get_grad_norm_direct: g.double().norm(2) per gradient partition: e + 8, 8
//     unscale_and_clip_grads: the fp32 flat gradient .mul_: 8
//     _reassign_or_swap_out_partitioned_parameters: the 16-bit flat partition .copy_(fp32): 4 + e, unless the
//     parameters live on the CPU (offload_param: that copy crosses PCIe, scheduled apart)  = 2e + 28 (32 at bf16)
//   the optimizer on the CPU, and stage 0 without BF16_Optimizer: 0 (not modelled beyond Adam).
#pragma once
#include "sim/common/units.hpp"

namespace zsim {

struct DeepSpeedStep {
  int stage = 0;
  bool bf16_optimizer = false;     // stage 0 with bf16: DeepSpeed's BF16_Optimizer
  bool optimizer_on_cpu = false;   // offload_optimizer
  bool params_on_cpu = false;      // offload_param (stage 3)
};

Bytes deepspeed_step_extra_bytes_per_param(const DeepSpeedStep& step, Bytes dtype_bytes);

}  // namespace zsim
