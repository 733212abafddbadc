// qwZ: symmetric block int8 quantization of a 16-bit weight shard, and its dequantization.
// Layout (ready for an all-gather): int8 data[n] contiguous, then separately float step[ceil(n/block)].
// Element i of block b dequantizes to data[i] * step[b]; step = absmax(block) / 127.
#pragma once
#include "kernels/kernel_types.hpp"

namespace zk {

// Elements per quantization block DeepSpeed's qwZ would pick for a tensor of n elements
// (deepspeed CUDAQuantizer.quantize: groups = ceil(n/8000), raised until n % (8*groups) == 0, then
// doubled while n % (16*groups) == 0 and n/groups > 8000); returns n / groups.
int64_t qwz_deepspeed_block_elems(int64_t n);

// Default block for our kernels when the caller has no per-tensor choice: 2048 elements.
inline constexpr int64_t kQwzDefaultBlockElems = 2048;

inline int64_t qwz_num_blocks(int64_t n, int64_t block_elems) { return (n + block_elems - 1) / block_elems; }

// Device pointers. block_elems >= 1 (a multiple of 8 takes the vectorised path).
void qwz_quantize(const void* in, Half16 fmt, int64_t n, int64_t block_elems, int8_t* q_out, float* steps_out,
                  StreamHandle stream);
void qwz_dequantize(const int8_t* q, const float* steps, int64_t n, int64_t block_elems, void* out, Half16 fmt,
                    StreamHandle stream);

}  // namespace zk
