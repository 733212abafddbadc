#include "runtime/exec/zeropp_ops.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "kernels/qwz_quant.hpp"
#include "runtime/comm/check.hpp"

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

}  // namespace

void run_zeropp_op(const Op& op, const ZeroppContext& c, const UsePointer& at, cudaStream_t s) {
  if (op.compute.dtype == zsim::DType::int8) {
    if (op.compute.what == ComputeKind::quantize) qwz_quantize(op, c, at, s);
    else if (op.compute.what == ComputeKind::dequantize) qwz_dequantize(op, c, at, s);
    else bad(op, "qwZ has no dequant_reduce");
  } else {
    bad(op, "qgZ is not built into zrun yet");
  }
  ZRUN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zrun
