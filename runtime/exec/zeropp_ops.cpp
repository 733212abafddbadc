#include "runtime/exec/zeropp_ops.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include <map>

#include "kernels/qgz_quant.hpp"
#include "kernels/qwz_quant.hpp"
#include "runtime/comm/check.hpp"
#include "sim/plan/quantization.hpp"

namespace zrun {

using zsim::BufferUse;
using zsim::ComputeKind;
using zsim::Op;
using zsim::Role;

namespace {

[[noreturn]] void bad(const Op& op, const std::string& what) {
  throw std::logic_error(fmt::format("op '{}' ({} {}): {}", op.name, zsim::to_string(op.compute.what),
                                     zsim::to_string(op.compute.dtype), what));
}

zk::Half16 half16(const Op& op, zsim::DType d) {
  if (d == zsim::DType::bf16) return zk::Half16::bf16;
  if (d == zsim::DType::fp16) return zk::Half16::fp16;
  bad(op, "ZeRO++'s kernels quantize 16-bit tensors (bf16 / fp16 training), not fp32");
}

// The op's uses of one role, in order.
std::vector<const BufferUse*> uses_of(const Op& op, Role role) {
  std::vector<const BufferUse*> v;
  for (const BufferUse& u : op.uses)
    if (u.role == role) v.push_back(&u);
  return v;
}

// qwZ quantize: [input: the 16-bit partition, output: its int8 values, output: its fp32 scales], one scale per
// block of ceil(partition / scales) elements (DeepSpeed's CUDAQuantizer groups: exact for its partitions).
void qwz_quantize(const Op& op, const ZeroppContext& c, const UsePointer& at, cudaStream_t s) {
  const auto in = uses_of(op, Role::input);
  const auto out = uses_of(op, Role::output);
  if (in.size() != 1 || out.size() != 2) bad(op, "needs one input and two outputs (int8 values, scales)");
  const std::int64_t n = out[0]->bytes, groups = out[1]->bytes / 4;
  if (in[0]->bytes != n * static_cast<std::int64_t>(zsim::dtype_bits(c.train_dtype) / 8) || groups < 1)
    bad(op, "the input, values and scales do not describe one partition");
  zk::qwz_quantize(at(*in[0]), half16(op, c.train_dtype), n, (n + groups - 1) / groups,
                   reinterpret_cast<std::int8_t*>(at(*out[0])), reinterpret_cast<float*>(at(*out[1])), s);
}

// qwZ dequantize: [input: every rank's int8 values, input: their scales, output: their 16-bit padded partitions],
// each strided in one block per rank.
void qwz_dequantize(const Op& op, const ZeroppContext& c, const UsePointer& at, cudaStream_t s) {
  const auto in = uses_of(op, Role::input);
  const auto out = uses_of(op, Role::output);
  if (in.size() != 2 || out.size() != 1) bad(op, "needs two inputs (int8 values, scales) and one output");
  const BufferUse &q = *in[0], &scales = *in[1], &o = *out[0];
  const std::int64_t n = q.bytes, groups = scales.bytes / 4, ranks = q.blocks;
  const zsim::Bytes e = zsim::dtype_bits(c.train_dtype) / 8;
  if (scales.blocks != ranks || o.blocks != ranks || o.bytes != n * static_cast<std::int64_t>(e) || groups < 1)
    bad(op, "values, scales and output do not describe the same partitions");
  const std::int64_t block = (n + groups - 1) / groups;
  const auto* qp = reinterpret_cast<const std::int8_t*>(at(q));
  const auto* sp = reinterpret_cast<const float*>(at(scales));
  std::byte* op_ = at(o);
  const zk::Half16 fmt = half16(op, c.train_dtype);
  const bool contiguous = q.block_stride == q.bytes && scales.block_stride == scales.bytes && o.block_stride == o.bytes;
  if (contiguous && n % block == 0) {  // every partition whole blocks: one launch over all of them
    zk::qwz_dequantize(qp, sp, n * ranks, block, op_, fmt, s);
    return;
  }
  for (std::int64_t j = 0; j < ranks; ++j)
    zk::qwz_dequantize(qp + j * q.block_stride, sp + j * (scales.block_stride / 4), n, block, op_ + j * o.block_stride,
                       fmt, s);
}

// ---- qgZ: every tensor's uses are tagged with it (unit, tensor); an op runs its kernels tensor by tensor ------------

struct TensorUses {
  std::vector<const BufferUse*> in, out, state;
};

std::vector<TensorUses> by_tensor(const Op& op) {
  std::vector<TensorUses> v;
  std::map<std::pair<int, int>, std::size_t> index;
  for (const BufferUse& u : op.uses) {
    if (u.unit < 0) bad(op, "a qgZ use names no tensor");
    const auto [it, added] = index.try_emplace({u.unit, u.tensor}, v.size());
    if (added) v.emplace_back();
    TensorUses& t = v[it->second];
    (u.role == Role::input ? t.in : u.role == Role::output ? t.out : t.state).push_back(&u);
  }
  return v;
}

zk::LocoParams loco_params(const ZeroppContext& c) {
  zk::LocoParams p;
  p.err_beta = c.loco_err_beta;
  p.reset_T = c.loco_reset_T;
  p.step = c.step;
  return p;
}

// LoCo's error of n elements, kept as int8 with fp32 scales (DeepSpeed's intra_ef_buf / inter_ef_buf): dequantized into
// a 16-bit working copy before the kernel updates it (left unread on a reset step), quantized back after.
struct LocoError {
  const BufferUse *values, *scales;
  std::int64_t n, block;
  void* work;
};

LocoError loco_error(const Op& op, const ZeroppContext& c, const TensorUses& t, const UsePointer& at,
                     const Scratch& scratch, cudaStream_t s) {
  if (t.state.size() != 2) bad(op, "LoCo's error is two state ranges (int8 values, scales)");
  const zsim::Bytes e = zsim::dtype_bits(c.train_dtype) / 8;
  LocoError err{t.state[0], t.state[1], t.state[0]->bytes, 0, scratch(e * t.state[0]->bytes)};
  const std::int64_t groups = err.scales->bytes / 4;
  err.block = (err.n + groups - 1) / groups;
  if (!loco_params(c).resets_now())
    zk::qwz_dequantize(reinterpret_cast<const std::int8_t*>(at(*err.values)), reinterpret_cast<const float*>(at(*err.scales)),
                       err.n, err.block, err.work, half16(op, c.train_dtype), s);
  return err;
}

void store(const Op& op, const ZeroppContext& c, const LocoError& err, const UsePointer& at, cudaStream_t s) {
  zk::qwz_quantize(err.work, half16(op, c.train_dtype), err.n, err.block, reinterpret_cast<std::int8_t*>(at(*err.values)),
                   reinterpret_cast<float*>(at(*err.scales)), s);
}

// Where a use's blocks (one per all-to-all peer: the schedule's peer-major qgz regions) start, for the kernels; a use
// of one block: back to back (their default).
zk::QgzChunks chunks_of(const Op& op, const BufferUse& values, const BufferUse& scales) {
  if (values.blocks != scales.blocks) bad(op, "a qgZ tensor's values and scales have different block counts");
  if (values.blocks == 1) return {};
  if (values.block_stride != scales.block_stride || values.block_stride % 4 != 0)
    bad(op, "a qgZ tensor's values and scales are not at one 4-byte block stride");
  return {values.block_stride, scales.block_stride / 4};
}

// Swizzled int4 quantize: [in: the 16-bit gradient | out: world partitions' values in slot order | out: their scales],
// each out one block per local peer (its nodes partitions); LoCo: [state: the intra-node error | state: its scales].
void qgz_quantize(const Op& op, const ZeroppContext& c, const TensorUses& t, const UsePointer& at,
                  const Scratch& scratch, cudaStream_t s) {
  if (t.in.size() != 1 || t.out.size() != 2) bad(op, "a qgZ quantize takes a gradient in, values and scales out");
  const zsim::Bytes e = zsim::dtype_bits(c.train_dtype) / 8;
  zk::QgzShape shape;
  shape.n = t.in[0]->bytes / e;
  shape.nodes = c.nodes;
  shape.devices_per_node = c.gpus_per_node;
  const std::int64_t nb = t.out[1]->total_bytes() / 4 / shape.world();
  if (!shape.valid() || nb < 1 || t.out[0]->total_bytes() != shape.n / 2 ||
      (t.out[0]->blocks != 1 && t.out[0]->blocks != shape.devices_per_node))
    bad(op, "the gradient, values and scales do not describe one qgZ tensor");
  const zk::QgzChunks out = chunks_of(op, *t.out[0], *t.out[1]);
  shape.block_elems = zsim::qgz_block_elems(shape.partition_elems(), nb);
  auto* q = reinterpret_cast<std::uint8_t*>(at(*t.out[0]));
  auto* steps = reinterpret_cast<float*>(at(*t.out[1]));
  if (t.state.empty()) {
    zk::qgz_swizzled_quantize(at(*t.in[0]), half16(op, c.train_dtype), shape, q, steps, s, out);
    return;
  }
  const LocoError err = loco_error(op, c, t, at, scratch, s);
  if (err.n != shape.n) bad(op, "LoCo's intra-node error is not the gradient's size");
  zk::qgz_swizzled_quantize_loco(at(*t.in[0]), half16(op, c.train_dtype), err.work, loco_params(c), shape, q, steps, s,
                                 out);
  store(op, c, err, at, s);
}

// Dequant-reduce. Between the hops: [in: values | in: scales | out: values | out: scales] (k = gpus_per_node chunks of
// m = nodes partitions in, their sum requantized out, one block per node; LoCo: [state: the inter-node error | state:
// its scales]). The final one: [in: values | in: scales | out: this rank's 16-bit partition], the average over every
// rank. Each in one block per peer of the hop it came over (or one block: chunks back to back).
void qgz_dequant_reduce(const Op& op, const ZeroppContext& c, const TensorUses& t, const UsePointer& at,
                        const Scratch& scratch, cudaStream_t s) {
  if (t.in.size() != 2 || (t.out.size() != 1 && t.out.size() != 2))
    bad(op, "a qgZ dequant-reduce takes values and scales in, and values and scales or a partition out");
  const auto* q_in = reinterpret_cast<const std::uint8_t*>(at(*t.in[0]));
  const auto* steps_in = reinterpret_cast<const float*>(at(*t.in[1]));
  const zk::QgzChunks in = chunks_of(op, *t.in[0], *t.in[1]);
  const zsim::Bytes e = zsim::dtype_bits(c.train_dtype) / 8;
  if (t.out.size() == 1) {
    const std::int64_t P = t.out[0]->bytes / e, k = P > 0 ? 2 * t.in[0]->total_bytes() / P : 0,
                       nb = k > 0 ? t.in[1]->total_bytes() / 4 / k : 0;
    if (P < 1 || k < 1 || k * P != 2 * t.in[0]->total_bytes() || nb < 1 || (t.in[0]->blocks != 1 && t.in[0]->blocks != k))
      bad(op, "values, scales and partition do not agree");
    zk::qgz_dequant_reduce(q_in, steps_in, static_cast<int>(k), P, zsim::qgz_block_elems(P, nb),
                           1.0f / static_cast<float>(c.nodes * c.gpus_per_node), at(*t.out[0]),
                           c.train_dtype == zsim::DType::fp16 ? zk::OutFormat::fp16 : zk::OutFormat::bf16, s, in);
    return;
  }
  const int m = c.nodes, k = c.gpus_per_node;
  const std::int64_t P = 2 * t.out[0]->total_bytes() / m, nb = t.out[1]->total_bytes() / 4 / m;
  if (P < 1 || nb < 1 || t.in[0]->total_bytes() != k * t.out[0]->total_bytes() ||
      (t.in[0]->blocks != 1 && t.in[0]->blocks != k) || (t.out[0]->blocks != 1 && t.out[0]->blocks != m))
    bad(op, "values and scales in and out do not agree");
  const zk::QgzChunks out = chunks_of(op, *t.out[0], *t.out[1]);
  const std::int64_t block = zsim::qgz_block_elems(P, nb);
  auto* q_out = reinterpret_cast<std::uint8_t*>(at(*t.out[0]));
  auto* steps_out = reinterpret_cast<float*>(at(*t.out[1]));
  if (t.state.empty()) {
    zk::qgz_dequant_reduce_requant(q_in, steps_in, k, m, P, block, q_out, steps_out, s, in, out);
    return;
  }
  const LocoError err = loco_error(op, c, t, at, scratch, s);
  if (err.n != m * P) bad(op, "LoCo's inter-node error is not the requantized partitions' size");
  zk::qgz_dequant_reduce_requant_loco(q_in, steps_in, k, m, P, block, err.work, half16(op, c.train_dtype),
                                      loco_params(c), q_out, steps_out, s, in, out);
  store(op, c, err, at, s);
}

}  // namespace

std::vector<const BufferUse*> qgz_reduced_partitions(const Op& op) {
  std::vector<const BufferUse*> v;
  if (op.kind != zsim::OpKind::compute || op.compute.what != ComputeKind::dequant_reduce ||
      op.compute.dtype != zsim::DType::int4)
    return v;
  for (const TensorUses& t : by_tensor(op))
    if (t.out.size() == 1) v.push_back(t.out[0]);
  return v;
}

void run_zeropp_op(const Op& op, const ZeroppContext& c, const UsePointer& at, const Scratch& scratch, cudaStream_t s) {
  if (op.compute.dtype == zsim::DType::int8) {
    if (op.compute.what == ComputeKind::quantize) qwz_quantize(op, c, at, s);
    else if (op.compute.what == ComputeKind::dequantize) qwz_dequantize(op, c, at, s);
    else bad(op, "qwZ has no dequant_reduce");
  } else {
    if (op.compute.what == ComputeKind::dequantize) bad(op, "qgZ dequantizes in its dequant-reduce ops");
    for (const TensorUses& t : by_tensor(op)) {
      if (op.compute.what == ComputeKind::quantize) qgz_quantize(op, c, t, at, scratch, s);
      else qgz_dequant_reduce(op, c, t, at, scratch, s);
    }
  }
  ZRUN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zrun
