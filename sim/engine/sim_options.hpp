// Options of one simulation run that are not part of the cluster or the schedule.
#pragma once
#include "sim/scenario/scenario.hpp"

namespace zsim {

struct SimOptions {
  // Training precision: GEMM-bound ops run at gpu.peak_tflops for bf16/fp16, gpu.peak_fp32_tflops for fp32.
  Precision precision = Precision::bf16;
};

}  // namespace zsim
