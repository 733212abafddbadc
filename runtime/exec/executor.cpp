#include "runtime/exec/executor.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>

#include <nccl.h>

#include "kernels/cpu/cpu_adam.hpp"
#include "kernels/cpu/half_to_fp32.hpp"
#include "kernels/fused_adam.hpp"
#include "kernels/half_convert.hpp"
#include "runtime/comm/check.hpp"
#include "runtime/comm/group_split.hpp"
#include "runtime/exec/batched_copy.hpp"
#include "runtime/exec/elementwise.hpp"
#include "runtime/exec/state_init.hpp"
#include "runtime/exec/zeropp_ops.hpp"
#include "runtime/model/activation_buffers.hpp"
#include "runtime/model/init.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/nvme/nvme_layout.hpp"
#include "sim/engine/op_work.hpp"
#include "sim/plan/tensor_layout.hpp"
#include "sim/schedule/zeroed_allocs.hpp"

namespace zrun {

using zsim::Access;
using zsim::BufferUse;
using zsim::CollectiveKind;
using zsim::ComputeKind;
using zsim::MemCategory;
using zsim::Op;
using zsim::OpId;
using zsim::OpKind;
using zsim::Role;

namespace {

[[noreturn]] void not_built(const Op& op, const std::string& what) {
  throw std::runtime_error(fmt::format("op '{}': {} is not built into zrun yet (issue 14)", op.name, what));
}

const BufferUse* find_use(const Op& op, Role role) {
  for (const BufferUse& u : op.uses)
    if (u.role == role) return &u;
  return nullptr;
}

const BufferUse& need_use(const Op& op, Role role) {
  if (const BufferUse* u = find_use(op, role)) return *u;
  throw std::logic_error(fmt::format("op '{}' names no {} buffer (schedule version 2 uses)", op.name,
                                     zsim::to_string(role)));
}

ncclDataType_t nccl_type(const Op& op) {
  switch (op.collective.dtype) {
    case zsim::DType::fp32: return ncclFloat32;
    case zsim::DType::bf16: return ncclBfloat16;
    case zsim::DType::fp16: return ncclFloat16;
    case zsim::DType::int8: return ncclInt8;
    case zsim::DType::int4: return ncclUint8;  // packed pairs: counted in bytes
    case zsim::DType::fp64: return ncclFloat64;
  }
  not_built(op, "a collective of this dtype");
}

ElemType elem_type(zsim::DType d) {
  return d == zsim::DType::fp32 ? ElemType::fp32 : d == zsim::DType::bf16 ? ElemType::bf16 : ElemType::fp16;
}

zk::Half16 half_fmt(zsim::DType d) { return d == zsim::DType::fp16 ? zk::Half16::fp16 : zk::Half16::bf16; }

}  // namespace

Executor::Executor(const zsim::Schedule& s, const zsim::Plan& plan, int rank, Communicators& comms, Arena& gpu,
                   Arena& cpu, model::Model& model, Watchdog& dog, const FaultInjector& faults, ExecOptions o)
    : s_(s),
      plan_(plan),
      rank_(rank),
      comms_(comms),
      gpu_(gpu),
      cpu_(cpu),
      model_(model),
      dog_(dog),
      faults_(faults),
      o_(o),
      buffers_(s, gpu, cpu,
               [this](const Op& a) -> zsim::Bytes {
                 // The model's own bytes for the activation buffers the schedule sizes by zsim's model.
                 return model::needed_activation_bytes(model_.layout(), model_.config().checkpointing, a.mem);
               }),
      waits_(zsim::stream_waits(s)),
      data_(model.config().vocab) {
  for (const zsim::ProcessGroup& g : s.groups)
    group_index_.push_back(split_color_key(rank, g, s.meta.world_size, s.meta.gpus_per_node).key);
  streams_.resize(s.streams.size());
  for (auto& st : streams_) ZRUN_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  dep_events_.assign(s.ops.size(), nullptr);
  for (const Op& op : s.ops)
    if (waits_.records_event[op.id]) ZRUN_CUDA_CHECK(cudaEventCreateWithFlags(&dep_events_[op.id], cudaEventDisableTiming));
  // The ops of the first step (the schedule may unroll several): run_step repeats them.
  bool seen_step = false;
  for (const Op& op : s.ops) {
    if (op.phase == zsim::Phase::init) {
      init_ops_.push_back(op.id);
      continue;
    }
    if (seen_step && op.phase != zsim::Phase::step) break;
    seen_step |= op.phase == zsim::Phase::step;
    step_ops_.push_back(op.id);
  }
  if (o_.time_ops) {
    start_events_.assign(s.ops.size(), nullptr);
    end_events_.assign(s.ops.size(), nullptr);
    // alloc / free run on the host: they take the time of their stream's last op. An op starts where the
    // previous one of its stream ended, unless it, or an alloc / free just before it on its stream, first waits for
    // another stream (then it records its start: e.g. a gather whose buffer's alloc waits for the optimizer).
    std::vector<char> stream_seen(s.streams.size(), 0), waited(s.streams.size(), 0);
    for (OpId id : step_ops_) {
      const int st = s.ops[id].stream;
      if (!timed(s.ops[id])) {
        waited[st] |= !waits_.waits[id].empty();
        continue;
      }
      if (!stream_seen[st] || !waits_.waits[id].empty() || waited[st])
        ZRUN_CUDA_CHECK(cudaEventCreate(&start_events_[id]));
      stream_seen[st] = 1;
      waited[st] = 0;
      ZRUN_CUDA_CHECK(cudaEventCreate(&end_events_[id]));
    }
  }
  // What the executor itself holds on the device: tokens and targets of every micro-step and their losses (the
  // schedule has no buffer for them).
  const auto& c = model.config();
  const zsim::Bytes token_bytes = 2 * s.model.grad_accum * c.tokens() * sizeof(std::int32_t);
  tokens_ = reinterpret_cast<std::int32_t*>(
      gpu.alloc("zrun.tokens", MemCategory::buffers, kBeyondSchedule, 0, "init", token_bytes));
  targets_ = tokens_ + s.model.grad_accum * c.tokens();
  losses_ = reinterpret_cast<float*>(
      gpu.alloc("zrun.losses", MemCategory::buffers, kBeyondSchedule, 0, "init", 4 * s.model.grad_accum));
  own_bytes_ = token_bytes + 4 * s.model.grad_accum;
  // The backward's activation gradients and, under full checkpointing, a layer's forward working set live in the
  // schedule's `grad` and `forward_work` buffers; a schedule without them (written before zsim allocated them, read
  // with --schedule) gets the executor's own, beyond the schedule, for the whole run.
  const model::OwnActivationBytes own = model::own_activation_bytes(s, model.layout(), c.checkpointing);
  if (own.grad_bytes > 0)
    act_grads_ = gpu.alloc("zrun.activation_grads", MemCategory::activations, kBeyondSchedule, 0, "init",
                           own.grad_bytes);
  if (own.forward_work_bytes > 0)
    forward_work_ = gpu.alloc("zrun.forward_work", MemCategory::activations, kBeyondSchedule, 0, "init",
                              own.forward_work_bytes);
  own_bytes_ += own.total();
  // Buffers that start at zero (sim/schedule/zeroed_allocs): gradients and buckets, the stage-3 all-reduce fetch buffer
  // and the reduce-scatter interleave buffer.
  zero_on_alloc_ = zsim::zeroed_allocs(s);
  for (std::size_t g = 0; g < s.groups.size(); ++g)
    if (s.groups[g].size == s.meta.world_size) world_group_ = static_cast<int>(g);
  if (o_.qgz_error && plan.qgz)
    qgz_meter_ = std::make_unique<QgzErrorMeter>(elem_type(plan.dtype), [this](std::size_t bytes) -> void* {
      return gpu_.alloc(fmt::format("zrun.qgz_error.{}", tmp_count_++), MemCategory::buffers, kBeyondSchedule, 0, "init",
                        bytes);
    });
  pending_grads_.resize(plan.units.size());
  unit_done_.assign(plan.units.size(), 0);
  model_.set_loss_scale(1.0f / static_cast<float>(s.model.grad_accum));
}

Executor::~Executor() {
  for (cudaEvent_t e : dep_events_)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : start_events_)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : end_events_)
    if (e) cudaEventDestroy(e);
  for (cudaStream_t st : streams_) cudaStreamDestroy(st);
}

bool Executor::timed(const Op& op) { return op.kind != OpKind::alloc && op.kind != OpKind::free; }

int Executor::rank_index(const Op& op) const {
  if (op.kind == OpKind::collective) return group_index_.at(op.collective.group);
  if (op.kind == OpKind::copy && op.copy.group >= 0) return group_index_.at(op.copy.group);
  return rank_;
}

// ---- init -------------------------------------------------------------------------------------------

void Executor::run_init() {
  // The NVMe tier: one swap file per buffer, its extents the ranges the ops use; room checked before any is made.
  const auto nvme = nvme_ranges(s_);
  if (!nvme.empty()) {
    nvme_ = std::make_unique<NvmeStore>(o_.nvme_dir, o_.nvme_tag);
    nvme_->check_space(nvme_bytes_per_rank(s_));
  }
  for (OpId id : init_ops_) {
    const Op& op = s_.ops[id];
    if (op.kind != OpKind::alloc)
      throw std::logic_error(fmt::format("init op '{}': zrun expects only allocations in the init phase", op.name));
    if (op.mem.tier == zsim::Tier::nvme) {
      nvme_file_[id] = nvme_->create(op.mem.buffer, nvme.at(id));
      nvme_file_bytes_[op.mem.category] += NvmeStore::file_bytes(nvme.at(id));
    } else {
      buffers_.alloc(op);
    }
  }
  initialise_states();
  // LoCo's error buffers start at zero (the first step resets them anyway: its kernels do not read them).
  for (OpId id : init_ops_)
    if (s_.ops[id].mem.detail == "loco_error")
      ZRUN_CUDA_CHECK(cudaMemset(buffers_.base(id), 0, s_.ops[id].mem.bytes));
  // Host gradient buffers start at zero once: the CPU optimizer's fp32 gradients (every step's boundary writes each
  // gradient range; the padding of a flat partition stays zero) and the 16-bit accumulation buffers (ZeRO-1 adds its
  // never-written copy, as DeepSpeed adds its zeros).
  for (OpId id : init_ops_)
    if (s_.ops[id].mem.category == MemCategory::grads && s_.ops[id].mem.tier == zsim::Tier::cpu)
      std::memset(buffers_.base(id), 0, s_.ops[id].mem.bytes);
  ZRUN_CUDA_CHECK(cudaDeviceSynchronize());
}

// The weights (whole model, stages 0-2, in the training dtype) and this rank's fp32 master partition with zero Adam
// moments, from the model's deterministic initialisation: the same values whatever the world size or stage. Where
// each tensor lies in `params` comes from the compute ops' `param` uses (DeepSpeed's flat order at stages 1-2,
// round_robin_gradients included).
void Executor::initialise_states() {
  if (plan_.stage == 3)
    return init_stage3_states(s_, plan_, model_.config(), rank_, init_ops_,
                              [this](OpId id, const void* data, std::size_t bytes) { put_state(id, data, bytes); });
  const auto& cfg = model_.config();
  const zsim::Bytes e = plan_.elem_bytes;
  OpId params = -1, optimizer = -1;
  for (OpId id : init_ops_) {
    const Op& op = s_.ops[id];
    if (op.mem.category == MemCategory::params && op.mem.detail.empty()) params = id;
    if (op.mem.category == MemCategory::optimizer) optimizer = id;
  }
  if (params < 0 || optimizer < 0) throw std::logic_error("schedule init allocates no params / optimizer buffer");
  std::map<std::pair<int, int>, zsim::Elements> place;  // (unit, tensor) -> first element in params
  for (const Op& op : s_.ops)
    if (op.kind == OpKind::compute)
      for (const BufferUse& u : op.uses)
        if (u.role == Role::param && u.alloc == params && u.unit >= 0 && u.tensor >= 0)
          place[{u.unit, u.tensor}] = u.offset / e;
  // Stages 1-2: DeepSpeed's flat buffer padded to N partitions (the padding stays zero).
  std::vector<float> flat(static_cast<std::size_t>(s_.ops[params].mem.bytes / e), 0.0f);
  for (std::size_t u = 0; u < plan_.units.size(); ++u)
    for (std::size_t k = 0; k < plan_.units[u].tensors.size(); ++k) {
      const zsim::TensorShape& t = plan_.units[u].tensors[k];
      const auto it = place.find({static_cast<int>(u), static_cast<int>(k)});
      if (it == place.end())
        throw std::logic_error(fmt::format("no compute op reads the weights of {}.{} in 'params'", plan_.units[u].name,
                                           t.name));
      model::init_tensor(cfg, model::tensor_full_name(plan_.units[u].name, t.name), 0, t.numel(),
                         flat.data() + it->second);
    }
  const std::vector<std::byte> weights = encode(flat, plan_.dtype);
  put_state(params, weights.data(), weights.size());
  // [master | exp_avg | exp_avg_sq] over this rank's partition (stage 0: the whole model); fp32 training at stage 0
  // keeps no master (the engine's optimizer updates the fp32 weights themselves): [exp_avg | exp_avg_sq].
  const zsim::Elements part = plan_.stage == 0 ? plan_.params : plan_.optimizer_partition;
  const zsim::Elements first = plan_.stage == 0 ? 0 : static_cast<zsim::Elements>(rank_) * part;
  const zsim::Elements words = plan_.optimizer_bytes_per_param / 4;
  std::vector<float> state(static_cast<std::size_t>(words * part), 0.0f);
  if (words == 3)
    for (zsim::Elements i = 0; i < part && first + i < static_cast<zsim::Elements>(flat.size()); ++i)
      state[i] = flat[first + i];
  if (static_cast<zsim::Bytes>(state.size() * 4) != s_.ops[optimizer].mem.bytes)
    throw std::logic_error(fmt::format("optimizer buffer holds {} bytes, zrun's layout needs {}",
                                       s_.ops[optimizer].mem.bytes, state.size() * 4));
  put_state(optimizer, state.data(), state.size() * 4);
}

void Executor::put_state(OpId id, const void* data, std::size_t bytes) {
  const zsim::MemOp& m = s_.ops[id].mem;
  if (static_cast<zsim::Bytes>(bytes) > m.bytes)
    throw std::logic_error(fmt::format("init of buffer '{}': {} bytes do not fit its {}", m.buffer, bytes, m.bytes));
  if (m.tier == zsim::Tier::gpu) {
    ZRUN_CUDA_CHECK(cudaMemcpy(buffers_.base(id), data, bytes, cudaMemcpyHostToDevice));
  } else if (m.tier == zsim::Tier::cpu) {
    std::memcpy(buffers_.base(id), data, bytes);
  } else {  // each range the schedule uses goes to its extent of the swap file
    const int f = nvme_file_.at(id);
    for (const NvmeRange& r : nvme_->ranges(f))
      if (r.offset < static_cast<zsim::Bytes>(bytes))
        nvme_->write(f, r.offset, std::min<zsim::Bytes>(r.bytes, bytes - r.offset),
                     static_cast<const char*>(data) + r.offset, "init." + m.buffer);
  }
}

std::vector<float> Executor::master_weights() {
  ZRUN_CUDA_CHECK(cudaDeviceSynchronize());
  OpId optimizer = -1;
  for (OpId id : init_ops_)
    if (s_.ops[id].mem.category == MemCategory::optimizer) optimizer = id;
  if (optimizer < 0) throw std::logic_error("schedule init allocates no optimizer buffer");
  const zsim::MemOp& m = s_.ops[optimizer].mem;
  std::vector<float> state(static_cast<std::size_t>(m.bytes / 4));
  if (m.tier == zsim::Tier::gpu) {
    ZRUN_CUDA_CHECK(cudaMemcpy(state.data(), buffers_.base(optimizer), m.bytes, cudaMemcpyDeviceToHost));
  } else if (m.tier == zsim::Tier::cpu) {
    std::memcpy(state.data(), buffers_.base(optimizer), m.bytes);
  } else {
    const int f = nvme_file_.at(optimizer);
    for (const NvmeRange& r : nvme_->ranges(f))
      nvme_->read(f, r.offset, r.bytes, reinterpret_cast<char*>(state.data()) + r.offset, "zrun.master_weights");
  }
  // [master | exp_avg | exp_avg_sq] per sub-group (stages 0-2: one).
  std::vector<float> master;
  zsim::Elements first = 0;
  const std::vector<zsim::Elements> subs =
      plan_.stage == 3 ? plan_.sub_groups : std::vector<zsim::Elements>{static_cast<zsim::Elements>(state.size() / 3)};
  for (zsim::Elements n : subs) {
    master.insert(master.end(), state.begin() + 3 * first, state.begin() + 3 * first + n);
    first += n;
  }
  return master;
}

// ---- one step ---------------------------------------------------------------------------------------

StepResult Executor::run_step(std::int64_t step, bool time_ops) {
  step_ = step;
  timing_ = o_.time_ops && time_ops;
  micro_ = -1;
  const auto& c = model_.config();
  const std::int64_t ga = s_.model.grad_accum, T = c.tokens(), dp = s_.meta.world_size;
  // Samples by global index: micro-step m of step `step` on rank r takes samples
  // ((step * ga + m) * dp + r) * micro_batch onwards, so every world size and stage sees the same samples.
  std::vector<std::int32_t> tok(ga * T), tgt(ga * T);
  for (std::int64_t m = 0; m < ga; ++m)
    data_.batch(((step * ga + m) * dp + rank_) * c.micro_batch, c.micro_batch, c.seq_len, tok.data() + m * T,
                tgt.data() + m * T);
  ZRUN_CUDA_CHECK(cudaMemcpy(tokens_, tok.data(), tok.size() * 4, cudaMemcpyHostToDevice));
  ZRUN_CUDA_CHECK(cudaMemcpy(targets_, tgt.data(), tgt.size() * 4, cudaMemcpyHostToDevice));
  // Gradients accumulate from zero every step (DeepSpeed's zero_grad).
  for (OpId id : init_ops_) {
    if (s_.ops[id].mem.category != MemCategory::grads) continue;
    if (s_.ops[id].mem.tier == zsim::Tier::gpu) ZRUN_CUDA_CHECK(cudaMemset(buffers_.base(id), 0, s_.ops[id].mem.bytes));
  }
  ZRUN_CUDA_CHECK(cudaDeviceSynchronize());

  if (qgz_meter_) qgz_meter_->begin_step(streams_[0]);
  cudaEvent_t t0, t1;
  ZRUN_CUDA_CHECK(cudaEventCreate(&t0));
  ZRUN_CUDA_CHECK(cudaEventCreate(&t1));
  ZRUN_CUDA_CHECK(cudaEventRecord(t0, streams_[0]));
  for (std::size_t i = 1; i < streams_.size(); ++i) ZRUN_CUDA_CHECK(cudaStreamWaitEvent(streams_[i], t0));
  // The host's time per op (not in a step timed per op, whose events add their own host calls).
  std::vector<double> op_issue_s(timing_ ? 0 : step_ops_.size());
  const auto issue0 = std::chrono::steady_clock::now();
  auto before = issue0;
  for (std::size_t i = 0; i < step_ops_.size(); ++i) {
    const Op& op = s_.ops[step_ops_[i]];
    launch(op, streams_[op.stream]);
    if (timing_) continue;
    const auto after = std::chrono::steady_clock::now();
    op_issue_s[i] = std::chrono::duration<double>(after - before).count();
    before = after;
  }
  const double host_issue_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - issue0).count();
  // Join every stream into the first, then wait (bounded: a hang names the op that did not finish).
  std::vector<cudaEvent_t> tails(streams_.size());
  for (std::size_t i = 1; i < streams_.size(); ++i) {
    ZRUN_CUDA_CHECK(cudaEventCreateWithFlags(&tails[i], cudaEventDisableTiming));
    ZRUN_CUDA_CHECK(cudaEventRecord(tails[i], streams_[i]));
    ZRUN_CUDA_CHECK(cudaStreamWaitEvent(streams_[0], tails[i]));
  }
  ZRUN_CUDA_CHECK(cudaEventRecord(t1, streams_[0]));
  wait_for_step_end(t1);
  if (const auto err = host_.error()) throw std::runtime_error(fmt::format("rank {}: step {}: {}", rank_, step, *err));

  StepResult r;
  float ms = 0;
  ZRUN_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
  r.seconds = ms * 1e-3;
  r.host_issue_s = host_issue_s;
  r.op_issue_s = std::move(op_issue_s);
  std::vector<float> losses(ga);
  ZRUN_CUDA_CHECK(cudaMemcpy(losses.data(), losses_, 4 * ga, cudaMemcpyDeviceToHost));
  float mean = 0;
  for (float l : losses) mean += l / static_cast<float>(ga);
  // The mean over ranks: one all-reduce on the world group.
  if (world_group_ >= 0 && s_.meta.world_size > 1) {
    ZRUN_CUDA_CHECK(cudaMemcpy(losses_, &mean, 4, cudaMemcpyHostToDevice));
    comms_.all_reduce_sum(losses_, 1, world_group_, streams_[0]);
    ZRUN_CUDA_CHECK(cudaStreamSynchronize(streams_[0]));
    ZRUN_CUDA_CHECK(cudaMemcpy(&mean, losses_, 4, cudaMemcpyDeviceToHost));
    mean /= static_cast<float>(s_.meta.world_size);
  }
  r.loss = mean;
  if (qgz_meter_) r.qgz_error = qgz_meter_->step_error(comms_.group(world_group_), streams_[0]);
  if (timing_) {
    r.ops.assign(s_.ops.size(), {});
    std::vector<double> stream_end(streams_.size(), 0.0);
    for (OpId id : step_ops_) {
      const int st = s_.ops[id].stream;
      if (!timed(s_.ops[id])) {
        r.ops[id] = {stream_end[st], stream_end[st]};
        continue;
      }
      float a = 0, b = 0;
      if (start_events_[id]) ZRUN_CUDA_CHECK(cudaEventElapsedTime(&a, t0, start_events_[id]));
      ZRUN_CUDA_CHECK(cudaEventElapsedTime(&b, t0, end_events_[id]));
      r.ops[id] = {start_events_[id] ? a * 1e-3 : stream_end[st], b * 1e-3};
      stream_end[st] = b * 1e-3;
    }
  }
  for (cudaEvent_t e : tails)
    if (e) cudaEventDestroy(e);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return r;
}

void Executor::wait_for_step_end(cudaEvent_t end) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t q = cudaEventQuery(end);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) ZRUN_CUDA_CHECK(q);
    if (const auto err = comms_.poll_async_error()) {
      std::cerr << fmt::format("zrun: rank {}: NCCL error during step {}: {}\n", rank_, step_, *err);
      comms_.abort_all();
      std::_Exit(kExitWatchdog);
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > o_.op_timeout_s) {
      // The first op in program order whose completion is not recorded yet is where the step stands.
      std::string where = "an unknown op";
      const auto& ev = timing_ ? end_events_ : dep_events_;
      for (OpId id : step_ops_)
        if (ev[id] && cudaEventQuery(ev[id]) == cudaErrorNotReady) {
          const Op& op = s_.ops[id];
          where = fmt::format("op '{}'{}", op.name,
                              op.kind == OpKind::collective ? " (group " + s_.groups[op.collective.group].name + ")" : "");
          break;
        }
      std::cerr << fmt::format("zrun: rank {}: step {} did not finish within {} s; it waits at {}; aborting the "
                               "communicators\n",
                               rank_, step_, o_.op_timeout_s, where);
      comms_.abort_all();
      std::_Exit(kExitWatchdog);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// ---- one op -----------------------------------------------------------------------------------------

void Executor::launch(const Op& op, cudaStream_t s) {
  for (OpId d : waits_.waits[op.id]) ZRUN_CUDA_CHECK(cudaStreamWaitEvent(s, dep_events_[d]));
  const std::string group = op.kind == OpKind::collective ? s_.groups[op.collective.group].name : "";
  const std::uint64_t token = dog_.begin(op.name, group);
  if (const auto fault = faults_.should_fault(rank_, op.name)) inject_fault(*fault, rank_, op.name);
  if (op.micro_step != micro_) {
    micro_ = op.micro_step;
    std::fill(unit_done_.begin(), unit_done_.end(), 0);
  }
  if (timing_ && start_events_[op.id]) ZRUN_CUDA_CHECK(cudaEventRecord(start_events_[op.id], s));
  try {
    switch (op.kind) {
      case OpKind::alloc: {
        std::byte* p = buffers_.alloc(op);
        // Buffers that backward accumulates into start at zero (sim/schedule/zeroed_allocs).
        if (zero_on_alloc_[op.id]) ZRUN_CUDA_CHECK(cudaMemsetAsync(p, 0, op.mem.bytes, s));
        break;
      }
      case OpKind::free: buffers_.free(op, s); break;
      case OpKind::compute: run_compute(op, s); break;
      case OpKind::collective: run_collective(op, s); break;
      case OpKind::copy: run_copy(op, s); break;
    }
  } catch (const DeviceError& e) {
    throw DeviceError(fmt::format("rank {}: op '{}'{}: {}", rank_, op.name, group.empty() ? "" : " (group " + group + ")",
                                  e.what()));
  }
  if (timing_ && timed(op)) ZRUN_CUDA_CHECK(cudaEventRecord(end_events_[op.id], s));
  if (waits_.records_event[op.id]) ZRUN_CUDA_CHECK(cudaEventRecord(dep_events_[op.id], s));
  dog_.end(token);
}

void Executor::run_compute(const Op& op, cudaStream_t s) {
  if (op.compute.device == zsim::Device::cpu) {
    if (op.compute.what != ComputeKind::optimizer) not_built(op, "a CPU op other than the optimizer");
    return run_cpu_optimizer(op, s);
  }
  switch (op.compute.what) {
    case ComputeKind::forward:
    case ComputeKind::backward:
    case ComputeKind::recompute: run_model(op, s); break;
    case ComputeKind::optimizer: run_optimizer(op, s); break;
    case ComputeKind::quantize:
    case ComputeKind::dequantize:
    case ComputeKind::dequant_reduce: run_zeropp(op, s); break;
  }
}

// ZeRO++'s quantization ops (zeropp_ops), with qgZ's error measured around them when asked: the reference before a
// quantize reads the gradient, the comparison after the final dequant-reduce (one output per tensor) has written it.
void Executor::run_zeropp(const Op& op, cudaStream_t s) {
  const bool metered = qgz_meter_ && op.compute.dtype == zsim::DType::int4;
  if (metered && op.compute.what == ComputeKind::quantize)
    for (const BufferUse& u : op.uses)
      if (u.role == Role::input)
        qgz_meter_->reference({u.unit, u.tensor}, buffers_.at(u, rank_), u.bytes / plan_.elem_bytes,
                              comms_.group(world_group_), s_.meta.world_size, s);
  ZeroppContext c;
  c.train_dtype = plan_.dtype;
  c.nodes = s_.meta.nodes;
  c.gpus_per_node = s_.meta.gpus_per_node;
  c.loco_err_beta = static_cast<float>(plan_.loco_err_beta);
  c.loco_reset_T = plan_.loco_reset_T;
  c.step = step_;
  std::vector<std::string> scratch;  // freed (stream-ordered) once the op's kernels are queued
  run_zeropp_op(
      op, c, [&](const BufferUse& u) { return buffers_.at(u, rank_); },
      [&](zsim::Bytes bytes) {
        scratch.push_back(fmt::format("zrun.zeropp_tmp.{}", tmp_count_++));
        return gpu_.alloc(scratch.back(), MemCategory::buffers, kBeyondSchedule, 0, op.name, bytes);
      },
      s);
  for (const std::string& t : scratch) gpu_.free(t, s);
  if (metered)
    for (const BufferUse* u : qgz_reduced_partitions(op))
      qgz_meter_->compare({u->unit, u->tensor}, buffers_.at(*u, rank_), u->bytes / plan_.elem_bytes, s);
}

double Executor::qgz_accumulated_error() {
  return qgz_meter_ ? qgz_meter_->accumulated_error(comms_.group(world_group_), streams_[0]) : -1;
}

void Executor::run_model(const Op& op, cudaStream_t s) {
  const auto& c = model_.config();
  model::Activations a;
  a.layer.assign(static_cast<std::size_t>(c.layers), nullptr);
  a.grad = act_grads_;
  a.tokens = tokens_ + op.micro_step * c.tokens();
  a.targets = targets_ + op.micro_step * c.tokens();
  for (const BufferUse& u : op.uses) {
    if (u.role != Role::activation) continue;
    const Op& alloc = s_.ops[u.alloc];
    void* p = buffers_.at(u, rank_);
    const std::string& detail = alloc.mem.detail;
    if (detail == "recompute" || detail == "forward_work") a.work = p;
    else if (detail == "grad") a.grad = p;
    else if (detail == "logits") a.head = p;
    else a.layer.at(static_cast<std::size_t>(alloc.layer)) = p;
  }
  // The weights of unit v, one pointer per tensor (a tied head: the embedding matrix).
  auto params_of = [&](int v) {
    const std::size_t n = plan_.units[v].tensors.size();
    model::UnitParams p(n == 0 ? 1 : n, nullptr);
    for (const BufferUse& u : op.uses)
      if (u.role == Role::param && (n == 0 ? u.unit == 0 && u.tensor == 0 : u.unit == v))
        p[n == 0 ? 0 : static_cast<std::size_t>(u.tensor)] = buffers_.at(u, rank_);
    for (const void* q : p)
      if (!q) throw std::logic_error(fmt::format("op '{}' names no buffer for a weight of unit {}", op.name, v));
    return p;
  };
  if (op.compute.what == ComputeKind::recompute) {
    std::vector<model::UnitParams> params;
    for (int v = plan_.layers.at(op.layer).first; v <= plan_.layers.at(op.layer).last; ++v) params.push_back(params_of(v));
    model_.recompute_layer(op.layer, params, a, s);
    return;
  }
  const int unit = op.unit;
  if (op.compute.what == ComputeKind::forward) {
    if (!a.work) a.work = forward_work_;
    if (!a.work && c.checkpointing && op.layer >= 0)
      throw std::logic_error(fmt::format("op '{}' names no forward working set (checkpointing)", op.name));
    model_.forward_unit(unit, params_of(unit), a, s);
    if (plan_.units[unit].is_head)
      ZRUN_CUDA_CHECK(cudaMemcpyAsync(losses_ + op.micro_step, model_.loss(a), 4, cudaMemcpyDeviceToDevice, s));
    return;
  }
  // Backward. Gradient destinations named by this segment; the others go to temporaries for later segments.
  if (!a.grad) throw std::logic_error(fmt::format("op '{}' names no activation-gradient buffer", op.name));
  const auto& tensors = plan_.units[unit].tensors;
  const ElemType et = elem_type(plan_.dtype);
  const zsim::Bytes e = plan_.elem_bytes;
  if (!unit_done_[unit]) {
    model::UnitGrads grads(tensors.empty() ? 1 : tensors.size(), nullptr);
    const BufferUse* tied_in = nullptr;
    for (const BufferUse& u : op.uses) {
      if (u.role != Role::grad) continue;
      if (u.access == Access::read) tied_in = &u;  // a tied head's gradient, held until the embedding's backward
      else if (tensors.empty() ? u.unit == 0 && u.tensor == 0 : u.unit == unit) grads[tensors.empty() ? 0 : u.tensor] = buffers_.at(u, rank_);
    }
    pending_grads_[unit].assign(tensors.size(), nullptr);
    for (std::size_t k = 0; k < tensors.size(); ++k)
      if (!grads[k]) {
        const std::string name = fmt::format("zrun.grad_tmp.{}", tmp_count_++);
        std::byte* t = gpu_.alloc(name, MemCategory::grads, kBeyondSchedule, 0, op.name, e * tensors[k].numel());
        ZRUN_CUDA_CHECK(cudaMemsetAsync(t, 0, e * tensors[k].numel(), s));
        grads[k] = pending_grads_[unit][k] = t;
        tmp_names_[t] = name;
      }
    if (tied_in) add_inplace(et, grads[0], buffers_.at(*tied_in, rank_), tied_in->bytes / e, s);
    model_.backward_unit(unit, params_of(unit), grads, a, s);
    unit_done_[unit] = 1;
    return;
  }
  for (const BufferUse& u : op.uses)
    if (u.role == Role::grad && u.access != Access::read && u.unit == unit && pending_grads_[unit].at(u.tensor)) {
      void* t = pending_grads_[unit][u.tensor];
      add_inplace(et, buffers_.at(u, rank_), t, u.bytes / e, s);
      gpu_.free(tmp_names_.at(t), s);
      tmp_names_.erase(t);
      pending_grads_[unit][u.tensor] = nullptr;
    }
}

// kernels/' fused Adam over one sub-group: [master | exp_avg | exp_avg_sq] in fp32, gradients in and weights out in
// the training dtype. fp32 training without a master (stage 0: `state` is [exp_avg | exp_avg_sq], 8 bytes per
// element) updates the fp32 weights in place.
void Executor::run_optimizer(const Op& op, cudaStream_t s) {
  const BufferUse& grad = need_use(op, Role::grad);
  const BufferUse& state = need_use(op, Role::state);
  const BufferUse& param = need_use(op, Role::param);
  const std::int64_t n = grad.bytes / plan_.elem_bytes;
  float* st = reinterpret_cast<float*>(buffers_.at(state, rank_));
  zk::AdamHyper h;
  h.lr = o_.lr;
  h.weight_decay = o_.weight_decay;
  h.step = step_ + 1;
  const bool master = state.bytes == 12 * n;
  if (!master && !(plan_.dtype == zsim::DType::fp32 && state.bytes == 8 * n))
    throw std::logic_error(fmt::format("op '{}': a state of {} bytes for {} elements is neither [master | exp_avg | "
                                       "exp_avg_sq] nor fp32 [exp_avg | exp_avg_sq]",
                                       op.name, state.bytes, n));
  if (plan_.dtype == zsim::DType::fp32) {
    const auto* g = reinterpret_cast<const float*>(buffers_.at(grad, rank_));
    auto* w = reinterpret_cast<float*>(buffers_.at(param, rank_));
    if (master) zk::fused_adam_fp32(st, st + n, st + 2 * n, g, w, n, h, s);
    else zk::fused_adam_fp32(w, st, st + n, g, nullptr, n, h, s);
  } else {
    zk::fused_adam(st, st + n, st + 2 * n, buffers_.at(grad, rank_), half_fmt(plan_.dtype), buffers_.at(param, rank_),
                   half_fmt(plan_.dtype), n, h, s);
  }
  ZRUN_CUDA_CHECK(cudaGetLastError());
}

// One NCCL call on the communicator of the op's group. Reductions of gradients average; an output of role `param`
// (the stage-3 all-reduce fetch) receives a sum. An output that is read_write receives the result added to what it
// holds; an output with a rank_stride is this rank's range (reduce_scatter into a slot of its input).
void Executor::run_collective(const Op& op, cudaStream_t s) {
  const int g = op.collective.group;
  ncclComm_t comm = comms_.group(g);
  const int n = s_.groups[g].size, idx = group_index_[g];
  if (op.collective.what == CollectiveKind::all_to_all) return run_all_to_all(op, comm, n, s);
  const BufferUse& in = need_use(op, Role::input);
  const BufferUse* param_out = find_use(op, Role::param);
  const BufferUse& out = param_out ? *param_out : need_use(op, Role::output);
  const ncclRedOp_t red = param_out ? ncclSum : ncclAvg;
  const ncclDataType_t t = nccl_type(op);
  const zsim::Bytes esz = zsim::dtype_bits(op.collective.dtype) / 8;
  std::byte* src = buffers_.at(in, idx);
  std::byte* dst = buffers_.at(out, idx);
  const bool accumulate = out.access == Access::read_write && !(in.alloc == out.alloc && in.offset == out.offset);
  std::string tmp_name;
  std::byte* result = dst;
  const zsim::Bytes result_bytes = op.collective.what == CollectiveKind::all_gather ? in.bytes * n : out.bytes;
  const bool strided = out.blocks > 1 && out.block_stride != out.bytes;  // gather into a temporary, then place
  if (accumulate || strided) {
    tmp_name = fmt::format("zrun.coll_tmp.{}", tmp_count_++);
    result = gpu_.alloc(tmp_name, MemCategory::buffers, kBeyondSchedule, 0, op.name, result_bytes);
  }
  switch (op.collective.what) {
    case CollectiveKind::all_gather:
      ZRUN_NCCL_CHECK(ncclAllGather(src, result, in.bytes / esz, t, comm, s));
      if (strided)
        ZRUN_CUDA_CHECK(cudaMemcpy2DAsync(dst, out.block_stride, result, in.bytes, in.bytes, n, cudaMemcpyDeviceToDevice,
                                          s));
      break;
    case CollectiveKind::reduce_scatter:
      ZRUN_NCCL_CHECK(ncclReduceScatter(src, result, out.bytes / esz, t, red, comm, s));
      break;
    case CollectiveKind::all_reduce:
      ZRUN_NCCL_CHECK(ncclAllReduce(src, result, in.bytes / esz, t, red, comm, s));
      break;
    case CollectiveKind::reduce:  // only the root's output receives the result (ncclReduce ignores the others')
      ZRUN_NCCL_CHECK(ncclReduce(src, result, in.bytes / esz, t, red, op.collective.root, comm, s));
      break;
    default: not_built(op, std::string("the ") + zsim::to_string(op.collective.what) + " collective");
  }
  if (accumulate && !strided) add_inplace(elem_type(op.collective.dtype), dst, result, out.bytes / esz, s);
  if (!tmp_name.empty()) gpu_.free(tmp_name, s);
}

// All-to-all (qgZ's two hops): per (input, output) pair, the input's n equal blocks go to the group's members in
// order and the output's block j comes from member j; every pair of the op in one NCCL group (send / receive).
void Executor::run_all_to_all(const Op& op, ncclComm_t comm, int n, cudaStream_t s) {
  if (op.uses.empty() || op.uses.size() % 2) need_use(op, Role::input), need_use(op, Role::output);
  for (std::size_t i = 0; i + 1 < op.uses.size(); i += 2) {  // checked before the NCCL group opens
    const BufferUse& in = op.uses[i];
    const BufferUse& out = op.uses[i + 1];
    if (in.role != Role::input || out.role != Role::output || in.bytes != out.bytes || in.bytes % n || in.blocks > 1 ||
        out.blocks > 1)
      throw std::logic_error(fmt::format("op '{}': an all-to-all takes (input, output) pairs of one contiguous size "
                                         "that divides by the group's {} members", op.name, n));
  }
  ZRUN_NCCL_CHECK(ncclGroupStart());
  for (std::size_t i = 0; i + 1 < op.uses.size(); i += 2) {
    const BufferUse& in = op.uses[i];
    const BufferUse& out = op.uses[i + 1];
    const std::size_t block = in.bytes / n;
    const std::byte* src = buffers_.at(in, rank_);
    std::byte* dst = buffers_.at(out, rank_);
    for (int j = 0; j < n; ++j) {
      ZRUN_NCCL_CHECK(ncclSend(src + j * block, block, ncclUint8, j, comm, s));
      ZRUN_NCCL_CHECK(ncclRecv(dst + j * block, block, ncclUint8, j, comm, s));
    }
  }
  ZRUN_NCCL_CHECK(ncclGroupEnd());
}

// kernels/' CPU Adam over one sub-group on a host thread, in the order of the op's stream: fp32 gradients and
// [master | exp_avg | exp_avg_sq] in pinned host memory, 16-bit weights out into a host buffer.
void Executor::run_cpu_optimizer(const Op& op, cudaStream_t s) {
  const BufferUse& grad = need_use(op, Role::grad);
  const BufferUse& state = need_use(op, Role::state);
  const BufferUse& param = need_use(op, Role::param);
  const std::int64_t n = state.bytes / 12;
  for (const BufferUse* u : {&grad, &state, &param})
    if (s_.ops[u->alloc].mem.tier != zsim::Tier::cpu)
      throw std::logic_error(fmt::format("op '{}': the CPU optimizer's {} buffer is not in host memory", op.name,
                                         zsim::to_string(u->role)));
  if (grad.bytes != 4 * n || param.bytes != plan_.elem_bytes * n)
    throw std::logic_error(fmt::format("op '{}': grad / param ranges do not cover the state's {} elements", op.name, n));
  float* master = reinterpret_cast<float*>(buffers_.at(state, rank_));
  const float* g = reinterpret_cast<const float*>(buffers_.at(grad, rank_));
  auto* w = reinterpret_cast<std::uint16_t*>(buffers_.at(param, rank_));
  zk::AdamHyper h;
  h.lr = o_.lr;
  h.weight_decay = o_.weight_decay;
  h.step = step_ + 1;
  const zk::Half16 fmt = half_fmt(plan_.dtype);
  // On the scenario's cores per rank (ExecOptions::cpu_adam_threads), as zsim prices it; 0: OpenMP's default team.
  const int threads = o_.cpu_adam_threads;
  host_.enqueue(s, op.name, [=] {
    zk::cpu_adam_step(master, master + n, master + 2 * n, g, w, fmt, n, h, zk::best_simd_level(), threads);
  });
}

// NVMe swaps: pairs of a pinned host range and a range of a swap file, transferred on a host thread in stream order;
// the pairs of one op (a swap_in call's parameters) are one batch per file, their requests in flight together.
void Executor::run_nvme_copy(const Op& op, cudaStream_t s) {
  const bool read = op.copy.what == zsim::CopyKind::nvme_read;
  std::vector<std::pair<int, std::vector<NvmeTransfer>>> batches;  // per file, in the order of the op's pairs
  for (std::size_t i = 0; i + 1 < op.uses.size(); i += 2) {
    const BufferUse& file = read ? op.uses[i] : op.uses[i + 1];
    const BufferUse& host = read ? op.uses[i + 1] : op.uses[i];
    const auto f = nvme_file_.find(file.alloc);
    if (f == nvme_file_.end() || s_.ops[host.alloc].mem.tier != zsim::Tier::cpu || file.blocks > 1 || host.blocks > 1 ||
        file.bytes != host.bytes)
      throw std::logic_error(fmt::format("op '{}': an NVMe {} needs a swap file range and a host range of the same "
                                         "size", op.name, read ? "read" : "write"));
    auto batch = std::find_if(batches.begin(), batches.end(), [&](const auto& b) { return b.first == f->second; });
    if (batch == batches.end()) batch = batches.insert(batches.end(), {f->second, {}});
    batch->second.push_back({file.offset, file.bytes, buffers_.at(host, rank_)});
  }
  NvmeStore* store = nvme_.get();
  host_.enqueue(s, op.name, [store, batches = std::move(batches), read, name = op.name] {
    for (const auto& [id, ranges] : batches) {
      if (read) store->read(id, ranges, name);
      else store->write(id, ranges, name);
    }
  });
}

// A plain d2d copy of more (input, output) pairs than the kernels the schedule gives it (CopyOp::kernel_launches: a
// torch.cat, one kernel per 128 inputs) runs as that many batched-copy launches, as torch.cat does; otherwise each
// pair is its own copy (DeepSpeed's per-parameter copy_ loops: one kernel each).
bool Executor::batches_pieces(const Op& op) const {
  return zsim::copy_run(op) == zsim::CopyRun::batched;
}

void Executor::run_batched_copy(const Op& op, cudaStream_t s) {
  std::vector<CopyPiece> pieces;
  for (std::size_t i = 0; i + 1 < op.uses.size(); i += 2) {  // each pair's rows (as run_copy's 2D copy), then its rest
    const BufferUse& in = op.uses[i];
    const BufferUse& out = op.uses[i + 1];
    const std::byte* src = buffers_.at(in, rank_index(op));
    std::byte* dst = buffers_.at(out, rank_index(op));
    const zsim::Bytes total = out.total_bytes();
    const zsim::Bytes row = in.blocks > 1 ? in.bytes : out.bytes;
    const zsim::Bytes spitch = in.blocks > 1 ? in.block_stride : row, dpitch = out.blocks > 1 ? out.block_stride : row;
    const zsim::Bytes rows = total / row, rest = total % row;
    for (zsim::Bytes r = 0; r < rows; ++r) pieces.push_back({src + r * spitch, dst + r * dpitch, row});
    if (rest > 0) pieces.push_back({src + rows * spitch, dst + rows * dpitch, rest});
  }
  const std::size_t launches = static_cast<std::size_t>(std::max(1, op.copy.kernel_launches));
  const std::size_t per_launch =
      std::min<std::size_t>(kBatchedCopyMaxPieces, (pieces.size() + launches - 1) / launches);
  for (std::size_t at = 0; at < pieces.size(); at += per_launch)
    batched_copy(pieces.data() + at, static_cast<int>(std::min(per_launch, pieces.size() - at)), s);
}

void Executor::run_copy(const Op& op, cudaStream_t s) {
  if (op.copy.rank >= 0 && op.copy.rank != rank_) return;  // a copy that only one rank runs
  if (op.uses.empty() || op.uses.size() % 2) need_use(op, Role::input), need_use(op, Role::output);
  if (op.copy.what == zsim::CopyKind::nvme_read || op.copy.what == zsim::CopyKind::nvme_write)
    return run_nvme_copy(op, s);
  if (batches_pieces(op)) return run_batched_copy(op, s);
  for (std::size_t i = 0; i + 1 < op.uses.size(); i += 2) {
    const BufferUse& in = op.uses[i];
    const BufferUse& out = op.uses[i + 1];
    std::byte* src = buffers_.at(in, rank_index(op));
    std::byte* dst = buffers_.at(out, rank_index(op));
    if (op.copy.cast) {  // tensor.to(dtype): contiguous ranges, element by element
      const zsim::Bytes from = zsim::dtype_bits(op.copy.cast_from) / 8, to = zsim::dtype_bits(op.copy.cast_to) / 8;
      if (in.blocks > 1 || out.blocks > 1 || out.access != Access::write || in.bytes / from != out.bytes / to)
        throw std::logic_error(fmt::format("op '{}': a cast needs contiguous ranges of one element count, written",
                                           op.name));
      convert(elem_type(op.copy.cast_from), elem_type(op.copy.cast_to), dst, src, out.bytes / to, s);
      continue;
    }
    if (out.access == Access::read_write) {  // accumulate: contiguous ranges of the training dtype
      if (in.blocks > 1 || out.blocks > 1) not_built(op, "an accumulating strided copy");
      add_inplace(elem_type(plan_.dtype), dst, src, out.bytes / plan_.elem_bytes, s);
      continue;
    }
    // Block by block: full rows of the narrower side, then what remains of the last.
    const zsim::Bytes total = out.total_bytes();
    const zsim::Bytes row = in.blocks > 1 ? in.bytes : out.bytes;
    const zsim::Bytes spitch = in.blocks > 1 ? in.block_stride : row, dpitch = out.blocks > 1 ? out.block_stride : row;
    const zsim::Bytes rows = total / row, rest = total % row;
    if (rows > 0)
      ZRUN_CUDA_CHECK(cudaMemcpy2DAsync(dst, dpitch, src, spitch, row, rows, cudaMemcpyDefault, s));
    if (rest > 0)
      ZRUN_CUDA_CHECK(cudaMemcpyAsync(dst + rows * dpitch, src + rows * spitch, rest, cudaMemcpyDefault, s));
  }
}

}  // namespace zrun
