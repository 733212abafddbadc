// qgZ: int4 gradient quantization in a swizzled layout for a two-level (intra-node, then inter-node)
// all-to-all, the fused dequant -> fp32 reduce -> requant between the two, the final dequant-reduce,
// and LoCo error feedback fused into both quantizations. Mirrors DeepSpeed's swizzle_quant,
// quantized_reduction, loco_swizzle_quant and loco_quantized_reduction (csrc/quantization).
#pragma once
#include "kernels/kernel_types.hpp"

namespace zk {

// The shape of one qgZ gradient: n elements on each of world = nodes * devices_per_node ranks,
// cut into world partitions of P = n / world elements (partition r is rank r's result, rank r =
// node * devices_per_node + device), each partition cut into blocks of block_elems (last one short).
// Requires n % (2 * world) == 0 (as DeepSpeed) and block_elems even.
struct QgzShape {
  int64_t n = 0;
  int nodes = 1;
  int devices_per_node = 1;
  int64_t block_elems = 2048;

  int world() const { return nodes * devices_per_node; }
  int64_t partition_elems() const { return n / world(); }
  int64_t blocks_per_partition() const { return (partition_elems() + block_elems - 1) / block_elems; }
  int64_t partition_bytes() const { return partition_elems() / 2; }  // int4: two per byte
  bool valid() const { return n > 0 && nodes > 0 && devices_per_node > 0 && block_elems > 0 &&
                              block_elems % 2 == 0 && n % (2 * static_cast<int64_t>(world())) == 0; }
};

// Swizzled position of partition p: partitions for the same local device are contiguous, node-major
// inside: slot(p) = (p % devices_per_node) * nodes + p / devices_per_node. With 2 nodes x 4 devices,
// partitions 0..7 land in slots as [0 4 1 5 2 6 3 7] (DeepSpeed's comment). Slots
// [d*nodes, (d+1)*nodes) are the one contiguous chunk the intra-node all-to-all sends to device d.
inline int64_t qgz_swizzled_slot(int64_t p, int nodes, int devices_per_node) {
  return (p % devices_per_node) * nodes + p / devices_per_node;
}

// Int4 packing: element 2j in the low nibble, 2j+1 in the high nibble, two's complement, range [-7, 7].
// Steps: step = absmax(block) / 7; value = q * step.
inline constexpr int kInt4Max = 7;

// LoCo (arXiv 2407.04480; DeepSpeed zeropp_loco_param): with stored error e (same 16-bit format as the
// gradient, original element order), c = g + e; q = Q(c); e <- err_beta * e + (1 - err_beta) * (c - deQ(q)).
// At steps where reset_T > 0 and step % reset_T == 0 (step counts from 0), e is taken as zero and not
// read, so the buffer needs no initialisation before step 0.
struct LocoParams {
  float err_beta = 0.8f;
  int64_t reset_T = 1024;
  int64_t step = 0;
  bool resets_now() const { return reset_T > 0 && step % reset_T == 0; }
};

// Where the chunks of a quantized buffer start (a chunk: the partitions one all-to-all peer sends or receives): chunk
// c's values at q + c * q_bytes, its scales at steps + c * steps_floats. 0 (the default): chunks back to back, as
// described at each function. A bucket laid out peer-major (every tensor's chunk for peer c together, so that the
// all-to-all sends one piece per peer) gives each tensor's chunks the bucket's per-peer stride.
struct QgzChunks {
  int64_t q_bytes = 0;
  int64_t steps_floats = 0;
};

// Quantize one rank's gradient (n elements, fmt) into world swizzled int4 partitions:
// q_out[world * P/2] bytes, steps_out[world * blocks_per_partition] floats, both in slot order; the chunk for local
// device d (slots [d * nodes, (d + 1) * nodes)) at `out`'s stride.
void qgz_swizzled_quantize(const void* grad, Half16 fmt, const QgzShape& s, uint8_t* q_out, float* steps_out,
                           StreamHandle stream, QgzChunks out = {});
// Same with LoCo error feedback; err has n elements of fmt, updated in place.
void qgz_swizzled_quantize_loco(const void* grad, Half16 fmt, void* err, const LocoParams& loco, const QgzShape& s,
                                uint8_t* q_out, float* steps_out, StreamHandle stream, QgzChunks out = {});

// k chunks, each holding m partitions (int4, P elements each, blocks of block_elems), back to back:
// q_in[k][m][P/2], steps_in[k][m][nb]. Output: the fp32 sum over k, requantized: q_out[m][P/2],
// steps_out[m][nb]. Intra-node step of qgZ: k = devices_per_node, m = nodes. The k input chunks at `in`'s stride,
// the m output partitions (one per node, each a chunk of the inter-node all-to-all) at `out`'s.
void qgz_dequant_reduce_requant(const uint8_t* q_in, const float* steps_in, int k, int m, int64_t partition_elems,
                                int64_t block_elems, uint8_t* q_out, float* steps_out, StreamHandle stream,
                                QgzChunks in = {}, QgzChunks out = {});
// Same with LoCo on the reduced sum; err has m * P elements of err_fmt, updated in place.
void qgz_dequant_reduce_requant_loco(const uint8_t* q_in, const float* steps_in, int k, int m,
                                     int64_t partition_elems, int64_t block_elems, void* err, Half16 err_fmt,
                                     const LocoParams& loco, uint8_t* q_out, float* steps_out, StreamHandle stream,
                                     QgzChunks in = {}, QgzChunks out = {});

// Final step: out[i] = out_scale * sum over k chunks (one partition of P elements each) of deQ(chunk)[i].
// Inter-node step of qgZ: k = nodes; out_scale = 1/world averages. The k chunks at `in`'s stride.
void qgz_dequant_reduce(const uint8_t* q_in, const float* steps_in, int k, int64_t partition_elems,
                        int64_t block_elems, float out_scale, void* out, OutFormat out_fmt, StreamHandle stream,
                        QgzChunks in = {});

}  // namespace zk
