// The schedule: the SPMD program of one training step (or several) that every rank runs.
// Both the simulator (sim/engine) and the GPU runtime execute it; memory and communication reports
// are derived by walking it. Ops are stored in program order, which is a topological order of deps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/common/collective_kind.hpp"
#include "sim/common/units.hpp"

namespace zsim {

inline constexpr const char* kScheduleFormat = "zsim.schedule";
inline constexpr int kScheduleVersion = 2;

using OpId = std::int32_t;

enum class OpKind { compute, collective, copy, alloc, free };
enum class Phase { init, forward, backward, step };
enum class ComputeKind { forward, backward, recompute, optimizer, quantize, dequantize, dequant_reduce };
enum class CopyKind { h2d, d2h, nvme_read, nvme_write, d2d };
enum class Device { gpu, cpu };
enum class Tier { gpu, cpu, nvme };
enum class MemCategory { params, grads, optimizer, activations, buffers };
enum class DType { fp32, bf16, fp16, int8, int4, fp64 };  // fp64: scalars (DeepSpeed stage 3's gradient norm)
enum class Access { read, write, read_write };
// What a buffer region is to the op that uses it: weights it computes with, gradients it produces (and
// accumulates), activations it saves or reads back, the input / output of a collective or copy, optimizer state.
enum class Role { param, grad, activation, input, output, state };

// A set of ranks that run a collective together, described by shape (all ranks symmetric).
// Members are `stride` ranks apart; size == ranks_per_node * nodes_spanned().
struct ProcessGroup {
  std::string name;        // "world", "hpz", "intra_node", "inter_node", ...
  int size = 1;
  int ranks_per_node = 1;  // members that share one node
  int stride = 1;          // global-rank distance between consecutive members
  int nodes_spanned() const { return size / ranks_per_node; }
  bool crosses_nodes() const { return nodes_spanned() > 1; }
  bool operator==(const ProcessGroup&) const = default;  // field-wise (serialisation round trip)
};

struct ComputeOp {
  ComputeKind what = ComputeKind::forward;
  Device device = Device::gpu;
  Flops flops = 0;          // tensor/arith work
  Bytes hbm_bytes = 0;      // memory traffic (read + write) for memory-bound kernels
  Elements elements = 0;    // elements processed (optimizer: parameters updated)
  // quantize / dequantize / dequant_reduce: the quantized element type (int8: qwZ weights, int4: qgZ gradients).
  DType dtype = DType::int8;
  // GPU kernels the op launches (forward / backward / recompute: counted as zrun's model runs the unit,
  // sim/plan/kernel_launches.hpp); the engine charges each the profile's efficiency.launch_us. 0: not given.
  int kernel_launches = 0;
  // Of hbm_bytes, the part that the GEMM calls of its unit's gemm_calls read and write beyond what their FLOP time
  // covers (eager attention's s x s scores: written by Q K^T, read by P V; backward written by dO V^T, read by the
  // dV, dQ and dK products). An engine that prices those calls with a GEMM model, whose operand traffic counts them,
  // charges only hbm_bytes - gemm_hbm_bytes as memory-bound time. 0: none.
  Bytes gemm_hbm_bytes = 0;
  // Of flops, those of a fused attention kernel (flash attention's core on attn.o: its forward, or its backward with
  // the scores' recomputation), which an engine may price at the profile's efficiency.flash_attention instead of
  // the unit's GEMM efficiency. 0: none.
  Flops fused_attention_flops = 0;
  bool operator==(const ComputeOp&) const = default;  // field-wise (serialisation round trip)
};

// `bytes` follows nccl-tests' "size": all_gather = output size, reduce_scatter = input size,
// all_reduce/broadcast/reduce = buffer size, all_to_all = total send buffer per rank.
// `reduce` sums every rank's buffer into the buffer of `root` (ncclReduce); only reduce has a root.
struct CollectiveOp {
  CollectiveKind what = CollectiveKind::all_gather;
  int group = 0;            // index into Schedule::groups
  Bytes bytes = 0;          // total, quantization scales included
  Bytes scale_bytes = 0;    // part of `bytes` that is quantization scales
  DType dtype = DType::bf16;
  int root = -1;            // reduce: the receiving rank, as its index within the group; -1 otherwise
  bool operator==(const CollectiveOp&) const = default;  // field-wise (serialisation round trip)
};

// d2d is a copy within the GPU's memory (a device-to-device cudaMemcpyAsync / copy kernel).
struct CopyOp {
  CopyKind what = CopyKind::h2d;
  Bytes bytes = 0;
  bool pinned = true;       // host side pinned (vs pageable)
  // A d2d copy that converts element types (torch's tensor.to(dtype) / copy_ across dtypes: DeepSpeed's casts
  // to and from communication_data_type): its input holds cast_from elements, its output cast_to elements.
  bool cast = false;
  int rank = -1;            // only this global rank runs the copy (e.g. copying out the slice it owns); -1: all
  DType cast_from = DType::fp32, cast_to = DType::fp32;
  // The process group whose rank index the `rank_stride` of its uses counts (hpZ's copy of each rank's slice of the
  // gathered weights into its secondary partition); -1: the world.
  int group = -1;
  // A d2d copy: the GPU kernels it runs. One torch.cat runs one kernel per 128 inputs (PyTorch's
  // CAT_ARRAY_BATCH_SIZE); DeepSpeed's loops of copy_ / add_ / .to() over the parameters run one per parameter.
  int kernel_launches = 1;
  bool operator==(const CopyOp&) const = default;  // field-wise (serialisation round trip)
};

// alloc / free of a named buffer on a tier. A free names a buffer allocated earlier and releases it.
struct MemOp {
  std::string buffer;
  Tier tier = Tier::gpu;
  MemCategory category = MemCategory::buffers;
  std::string detail;       // sub-category for buffers: "bucket", "prefetch", "hpz", "quant", "loco_error", ...
  Bytes bytes = 0;
  bool operator==(const MemOp&) const = default;  // field-wise (serialisation round trip)
};

// A byte range of a schedule buffer that an op reads or writes (version 2). The buffer is named by the id of
// the alloc op that created it, which is live at the op. `unit`/`tensor` say which model tensor the range
// holds (indices into Schedule::model.units and that unit's tensors), -1 when it is not one tensor.
// Ranks differ only where `rank_stride` is set: rank r's range starts at offset + r x rank_stride, r being its
// index in the collective's group (world for other ops); e.g. a stage-1/2 rank's slice of the flat gradients.
// A strided range is `blocks` blocks of `bytes` each, `block_stride` apart (e.g. one shard of every rank's
// partition, or one tensor's chunks in a gathered flat buffer); `bytes` is then the size of one block.
struct BufferUse {
  OpId alloc = -1;
  Bytes offset = 0;
  Bytes bytes = 0;
  Role role = Role::input;
  Access access = Access::read;
  int unit = -1;
  int tensor = -1;
  Bytes rank_stride = 0;
  int blocks = 1;
  Bytes block_stride = 0;
  Bytes total_bytes() const { return bytes * blocks; }
  bool operator==(const BufferUse&) const = default;  // field-wise (serialisation round trip)
};

struct Op {
  OpId id = 0;
  OpKind kind = OpKind::compute;
  std::string name;         // e.g. "fwd.L12.all_gather"
  Phase phase = Phase::forward;
  int stream = 0;           // index into Schedule::streams
  int layer = -1;           // transformer layer, -1 if none (embedding, optimizer, ...)
  int micro_step = 0;       // gradient-accumulation micro-step
  int unit = -1;            // model unit (Schedule::model.units) a compute op computes, -1 if none
  std::vector<OpId> deps;   // ops (earlier in program order) that must finish first
  ComputeOp compute;        // valid when kind == compute
  CollectiveOp collective;  // valid when kind == collective
  CopyOp copy;              // valid when kind == copy
  MemOp mem;                // valid when kind == alloc / free
  std::vector<BufferUse> uses;  // the buffer regions it reads / writes, in the order the kind documents
  bool operator==(const Op&) const = default;  // field-wise (serialisation round trip)
};

struct ScheduleMeta {
  std::string scenario;     // where it came from
  int world_size = 1;
  int nodes = 1;
  int gpus_per_node = 1;
  Elements params = 0;      // model parameters (count)
  std::int64_t tokens_per_step = 0;  // global tokens per optimizer step
  int steps = 1;
  // The framework that runs it: "" zrun (its executor issues the ops as the schedule lists them), "deepspeed"
  // (DeepSpeed + PyTorch eager running transformers' modeling code: zsim's runtime deepspeed), with its ZeRO stage;
  // an engine prices the host's time to issue the ops by it (sim/engine/deepspeed_host.hpp).
  std::string framework;
  int zero_stage = -1;      // with framework "deepspeed": 0-3
  bool operator==(const ScheduleMeta&) const = default;  // field-wise (serialisation round trip)
};

// The model the schedule trains, as a runtime needs it to build real layers (version 2). Units are the modules
// that compute ops name (`Op::unit`): embedding, per layer attn.norm .. mlp.down, final.norm, head.
struct ModelTensor {
  std::string name;         // "attn.q", "attn.q.bias", "mlp.norm", "embedding", "positions", ...
  std::int64_t rows = 0;
  std::int64_t cols = 0;    // 0 for a vector
  bool operator==(const ModelTensor&) const = default;
};
// `calls` GEMM calls of one shape, each a strided batch of `batch` products D[m x n] = A[m x k] B[k x n].
struct GemmCalls {
  std::int64_t m = 0, n = 0, k = 0, batch = 1, calls = 1;
  bool operator==(const GemmCalls&) const = default;
};
struct ModelUnit {
  std::string name;         // "embedding", "L3.attn.q", "final.norm", "head"
  int layer = -1;
  std::vector<ModelTensor> tensors;  // its own tensors (a tied head has none and uses the embedding's)
  // The kind of memory-bound kernels its ops' hbm_bytes are (efficiency.hbm_by_kind): "copy" (the embedding
  // lookup), "norm", "softmax" (eager attention's scores), "activation" (the MLP's), "cross_entropy" (the head's
  // loss); "" none given (the engine then goes by the unit: docs/schedule-format.md).
  std::string hbm_kind;
  // The GEMM calls its forward (and a recompute of its layer) and its backward run beyond its weight matrices'
  // products, per micro-batch: eager attention's core on attn.o (sim/plan/attention_flops.hpp). Their FLOPs are part
  // of the ops' flops. Empty: none (flash attention's core is one fused kernel).
  std::vector<GemmCalls> forward_gemms{}, backward_gemms{};
  bool operator==(const ModelUnit&) const = default;
};
struct ScheduleModel {
  std::string name;
  std::int64_t layers = 0, hidden = 0, ffn_hidden = 0, heads = 0, kv_heads = 0, vocab = 0;
  std::int64_t max_position_embeddings = 0;  // learned positions; 0 = none
  bool tie_word_embeddings = false;
  bool gated_mlp = true;    // SwiGLU (gate, up, down) vs GeLU (up, down)
  bool bias = false;        // linear layers and norms carry biases (LayerNorm); otherwise RMSNorm
  std::int64_t micro_batch = 1, seq_len = 0, grad_accum = 1;
  DType dtype = DType::bf16;  // training dtype of params, activations and gradients
  bool checkpointing = false; // full activation checkpointing (recompute ops)
  std::vector<ModelUnit> units;
  std::string model_type;  // transformers' model_type where the model came from a config.json, else ""
  bool operator==(const ScheduleModel&) const = default;
};

struct Schedule {
  ScheduleMeta meta;
  ScheduleModel model;
  std::vector<std::string> streams;   // named streams: "compute", "comm", "h2d", "d2h", "nvme", "cpu"
  std::vector<ProcessGroup> groups;
  std::vector<Op> ops;                // program order; ops[i].id == i

  // Index of a stream/group by name, adding it if absent.
  int stream(const std::string& name);
  int group(const ProcessGroup& g);

  // Appends an op, assigns its id (its index), and returns the id.
  OpId add(Op op);
  bool operator==(const Schedule&) const = default;  // field-wise (serialisation round trip)
};

// Structural checks: ids are indices, deps point backwards, stream/group indices valid,
// every free matches a live alloc of the same name, tier and size, and every buffer use names an alloc that is
// live at the op, with its byte range inside the buffer and its unit/tensor inside the model. Throws
// std::logic_error.
void check_schedule(const Schedule& s);

const char* to_string(OpKind);
const char* to_string(Phase);
const char* to_string(ComputeKind);
const char* to_string(CollectiveKind);
const char* to_string(CopyKind);
const char* to_string(Device);
const char* to_string(Tier);
const char* to_string(MemCategory);
const char* to_string(DType);
const char* to_string(Access);
const char* to_string(Role);
Bytes dtype_bits(DType);

}  // namespace zsim
