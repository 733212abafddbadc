// What zrun's flash attention kernels (flash_attention.cu) run: bf16 / fp16 with head dim 64 or 128. Header
// only and free of CUDA and simulator headers, so the host side (model_config) can refuse a scenario early.
#pragma once
#include <cstdint>

#include "runtime/model/dtype.hpp"

namespace zrun::model {

inline bool flash_attention_supported(DType dt, std::int64_t head_dim) {
  return (dt == DType::bf16 || dt == DType::fp16) && (head_dim == 64 || head_dim == 128);
}

}  // namespace zrun::model
