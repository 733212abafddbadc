// ZeRO++'s compute ops, run from their schedule `uses` with kernels/' quantization kernels: qwZ's int8 quantize
// of a weight partition and dequantize of the gathered partitions, qgZ's int4 swizzled quantize, dequant-reduce-
// requantize and final dequant-reduce, with LoCo's error feedback where the ops name an error buffer (docs/
// schedule-format.md, "ZeRO++"). The executor resolves each use to a pointer; this file only reads the ops.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include <cuda_runtime_api.h>

#include "sim/schedule/schedule.hpp"

namespace zrun {

struct ZeroppContext {
  zsim::DType train_dtype = zsim::DType::bf16;  // gradients and weights (bf16 / fp16)
  int nodes = 1;                                // qgZ: the inter-node hop's ranks
  int gpus_per_node = 1;                        // qgZ: the intra-node hop's ranks
  float loco_err_beta = 0.8f;                   // LoCo (zeropp_loco_param)
  std::int64_t loco_reset_T = 1024;
  std::int64_t step = 0;                        // the optimizer step (LoCo's reset counter)
};

using UsePointer = std::function<std::byte*(const zsim::BufferUse&)>;
// Device memory the op needs beyond its uses (LoCo's 16-bit working copy of an int8 error, as DeepSpeed dequantizes
// it into a new tensor), valid on the op's stream until the op's kernels have run.
using Scratch = std::function<std::byte*(zsim::Bytes)>;

// Runs one quantize / dequantize / dequant_reduce op on `stream`. Throws std::logic_error naming the op when its
// uses are not what its kind and dtype need.
void run_zeropp_op(const zsim::Op& op, const ZeroppContext& c, const UsePointer& at, const Scratch& scratch,
                   cudaStream_t stream);

// qgZ's final dequant-reduce: each tensor's reduced partition (its only output), in the op's order; empty for any other
// op (the requantizing dequant-reduce has two outputs per tensor).
std::vector<const zsim::BufferUse*> qgz_reduced_partitions(const zsim::Op& op);

}  // namespace zrun
