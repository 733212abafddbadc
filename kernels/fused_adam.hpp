// Fused Adam/AdamW over one partition on the GPU: fp32 master weights and moments updated in place,
// 16-bit gradient in, 16-bit weights out, one pass over memory (28 bytes per parameter).
#pragma once
#include "kernels/adam_hyper.hpp"
#include "kernels/kernel_types.hpp"

namespace zk {

// Device pointers, n elements each. weights_out may be nullptr (no 16-bit copy wanted).
void fused_adam(float* master, float* exp_avg, float* exp_avg_sq, const void* grad, Half16 grad_fmt,
                void* weights_out, Half16 weights_fmt, int64_t n, const AdamHyper& h, StreamHandle stream);

// fp32 training: fp32 gradient in and fp32 weights out (40 bytes per parameter). DeepSpeed still updates a
// separate fp32 partition then (stage_1_and_2.py clones the flat partition into single_partition_of_fp32_groups,
// stage3.py into fp32_partitioned_groups_flat) and copies it back into the model's weights.
void fused_adam_fp32(float* master, float* exp_avg, float* exp_avg_sq, const float* grad, float* weights_out,
                     int64_t n, const AdamHyper& h, StreamHandle stream);

}  // namespace zk
