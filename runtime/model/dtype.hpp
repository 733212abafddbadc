// The training dtype of the model's tensors. Its own small enum (not zsim::DType) so the .cu files, which
// nvcc compiles as C++17, need no simulator header.
#pragma once
#include <cstdint>

namespace zrun::model {

enum class DType { fp32, bf16, fp16 };

inline std::int64_t dtype_bytes(DType d) { return d == DType::fp32 ? 4 : 2; }
inline const char* dtype_name(DType d) { return d == DType::fp32 ? "fp32" : d == DType::bf16 ? "bf16" : "fp16"; }

}  // namespace zrun::model
