// Small device kernels the executor needs between schedule ops: dst += src (accumulating a gradient that was
// produced elsewhere), in the training dtype or fp32, and dst = src converted between element types (a cast copy:
// DeepSpeed's tensor.to(communication_data_type) and back). Launcher API only; the kernels are in elementwise.cu.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace zrun {

enum class ElemType { fp32, bf16, fp16 };

void add_inplace(ElemType t, void* dst, const void* src, std::int64_t n, cudaStream_t stream);

// n elements of type `from` at src, written as type `to` at dst (rounded to nearest even).
void convert(ElemType from, ElemType to, void* dst, const void* src, std::int64_t n, cudaStream_t stream);

}  // namespace zrun
