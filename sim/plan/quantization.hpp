// Sizes of ZeRO++ quantized collectives, following DeepSpeed's kernels: qwZ (int8 weight all-gather,
// CUDAQuantizer in partition_parameters.py) and qgZ (int4 two-hop gradient all-to-all,
// all_to_all_quant_reduce in runtime/comm/coalesced_collectives.py). Pure arithmetic.
#pragma once
#include <cstdint>

#include "sim/common/units.hpp"

namespace zsim {

inline constexpr Bytes kScaleBytes = 4;              // one fp32 scale per quantization group
inline constexpr Elements kQwzTargetGroupSize = 8000;  // CUDAQuantizer.target_group_size

// Number of int8 groups CUDAQuantizer picks for a flat tensor of `numel` elements: start from
// ceil(numel / 8000), step up until 8 * groups divides numel, then double while the group is still
// larger than 8000 and 16 * groups divides numel. Falls back to ceil(numel / 8000) where DeepSpeed
// would assert (numel not a multiple of 8).
std::int64_t qwz_groups(Elements numel);

// Bytes one rank contributes to a qwZ all-gather of its `partition` elements: int8 values + scales.
struct QuantizedSize {
  Bytes data = 0;
  Bytes scales = 0;
  Bytes total() const { return data + scales; }
};
QuantizedSize qwz_partition_bytes(Elements partition);

// qgZ on one gradient matrix of rows x cols on `world` ranks, `gpus_per_node` per node.
// Hop 1 (intra-node all-to-all): int4 of the whole tensor + one scale per group, with
// groups = max(rows, cols, world). Hop 2 (inter-node all-to-all): the intra-node-reduced
// 1/gpus_per_node slice, requantized to int4 with groups / gpus_per_node scales.
struct QgzSizes {
  QuantizedSize intra;  // all_to_all send buffer of one rank on the intra-node group
  QuantizedSize inter;  // all_to_all send buffer of one rank on the inter-node group
};
QgzSizes qgz_sizes(std::int64_t rows, std::int64_t cols, int world, int gpus_per_node);

// The kernels' blocks (one scale each) per rank partition of a qgZ gradient: the partition of P = numel / world
// elements is cut into blocks of ceil(P / floor(groups / world)) elements, rounded up to even (int4 pairs), with
// DeepSpeed's groups = max(rows, cols, world); so world x blocks <= groups and the scales fit DeepSpeed's buffers.
std::int64_t qgz_blocks_per_partition(std::int64_t rows, std::int64_t cols, int world);
// The block a runtime uses for a partition of P elements in `blocks` blocks (the inverse of the above: the same count).
Elements qgz_block_elems(Elements partition, std::int64_t blocks);

// DeepSpeed applies qgZ only to matrices whose numel divides by 2 * world (else reduce-scatter).
bool qgz_applies(std::int64_t rows, std::int64_t cols, int world);

}  // namespace zsim
