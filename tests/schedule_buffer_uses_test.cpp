// Schedule version 2: the buffer uses that let a runtime execute compute ops from structured fields alone.
// Over every bundled scenario (and variations of stage, checkpointing and tied heads): every buffer an op
// reads or writes is live at that op, every forward / backward / recompute names the weights of every tensor
// it computes with, and the backward segments of a unit produce each of its gradients exactly once per
// micro-step.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>

#include "sim/plan/plan.hpp"
#include "sim/plan/quantization.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "tests/pipeline_test_util.hpp"

namespace zsim {
namespace {

using test::bundled_scenario_files;
using test::load_bundled;
using test::small_overrides;
using test::operator+;

struct Variant {
  std::string file;
  std::vector<std::string> overrides;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (const auto& f : bundled_scenario_files()) {
    out.push_back({f, small_overrides(3)});
    for (const char* stage : {"0", "1", "2", "3"})
      for (const char* ckpt : {"none", "full"})
        out.push_back({f, small_overrides(2) + std::vector<std::string>{
                                                   std::string("deepspeed.zero_optimization.stage=") + stage,
                                                   std::string("training.activation_checkpointing=") + ckpt,
                                                   "training.grad_accum=2"}});
  }
  return out;
}

// Loads a variant; scenarios that do not validate under an override (e.g. ZeRO++ below stage 3) are skipped.
bool load(const Variant& v, Scenario& s) {
  try {
    s = load_bundled(v.file, v.overrides);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

TEST(ScheduleBufferUses, EveryBufferAnOpUsesIsLiveThereInEveryBundledScenario) {
  int checked = 0;
  for (const Variant& v : variants()) {
    Scenario s;
    if (!load(v, s)) continue;
    const Schedule sch = make_schedule(s, make_plan(s), 2);
    EXPECT_NO_THROW(check_schedule(sch)) << v.file;
    size_t uses = 0;
    for (const Op& op : sch.ops) uses += op.uses.size();
    EXPECT_GT(uses, 0u) << v.file;
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(ScheduleBufferUses, ComputeOpsNameTheWeightsOfEveryTensorTheyUse) {
  for (const Variant& v : variants()) {
    Scenario s;
    if (!load(v, s)) continue;
    const Plan p = make_plan(s);
    const Schedule sch = make_schedule(s, p, 1);
    for (const Op& op : sch.ops) {
      if (op.kind != OpKind::compute || op.unit < 0) continue;
      if (op.compute.what != ComputeKind::forward && op.compute.what != ComputeKind::backward) continue;
      std::set<int> tensors;
      for (const BufferUse& u : op.uses)
        if (u.role == Role::param && u.unit == op.unit) {
          tensors.insert(u.tensor);
          EXPECT_EQ(u.bytes, p.elem_bytes * p.units[u.unit].tensors[u.tensor].numel()) << op.name;
          EXPECT_EQ(u.access, Access::read) << op.name;
        }
      EXPECT_EQ(tensors.size(), p.units[op.unit].tensors.size()) << v.file << " " << op.name;
      if (p.units[op.unit].is_head && p.tied_head) {
        bool embedding = false;
        for (const BufferUse& u : op.uses) embedding |= u.role == Role::param && u.unit == 0 && u.tensor == 0;
        EXPECT_TRUE(embedding) << "a tied head computes with the embedding matrix: " << op.name;
      }
    }
  }
}

TEST(ScheduleBufferUses, BackwardProducesEachGradientOncePerMicroStep) {
  for (const Variant& v : variants()) {
    Scenario s;
    if (!load(v, s)) continue;
    const Plan p = make_plan(s);
    const Schedule sch = make_schedule(s, p, 1);
    std::map<std::pair<int, std::pair<int, int>>, int> produced;  // (micro, (unit, tensor)) -> times
    for (const Op& op : sch.ops)
      if (op.kind == OpKind::compute && op.compute.what == ComputeKind::backward)
        for (const BufferUse& u : op.uses)
          if (u.role == Role::grad && u.access != Access::read && u.unit == op.unit)
            ++produced[{op.micro_step, {u.unit, u.tensor}}];
    for (int micro = 0; micro < s.training.grad_accum; ++micro)
      for (int u = 0; u < static_cast<int>(p.units.size()); ++u)
        for (int k = 0; k < static_cast<int>(p.units[u].tensors.size()); ++k)
          EXPECT_EQ((produced[{micro, {u, k}}]), 1) << v.file << " micro " << micro << " " << p.units[u].name << "#" << k;
  }
}

TEST(ScheduleBufferUses, ALayersActivationsAreWrittenBeforeItsFirstUnitComputes) {
  Scenario s = load_bundled("llama2-7b-zero2-8xa100.yaml", small_overrides(2));
  const Schedule sch = make_schedule(s, make_plan(s), 1);
  // The embedding writes layer 0's input into act.L0; layer 0's first unit then reads and writes it.
  const Op* embedding = nullptr;
  for (const Op& op : sch.ops)
    if (op.name == "fwd.embedding") embedding = &op;
  ASSERT_NE(embedding, nullptr);
  bool writes_l0 = false;
  for (const BufferUse& u : embedding->uses)
    writes_l0 |= u.role == Role::activation && u.access == Access::write &&
                 sch.ops[u.alloc].mem.buffer.rfind("act.L0.", 0) == 0;
  EXPECT_TRUE(writes_l0);
}

TEST(ScheduleBufferUses, AUseOfAFreedBufferIsRejected) {
  Scenario s = load_bundled("llama2-7b-zero2-8xa100.yaml", small_overrides(2));
  Schedule sch = make_schedule(s, make_plan(s), 1);
  // Point the last backward's weight use at an activation buffer that has been freed by then.
  OpId freed_alloc = -1;
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::alloc && op.mem.buffer.rfind("act.L1.", 0) == 0) freed_alloc = op.id;
  ASSERT_GE(freed_alloc, 0);
  Op* last_bwd = nullptr;
  for (Op& op : sch.ops)
    if (op.kind == OpKind::compute && op.compute.what == ComputeKind::backward) last_bwd = &op;
  ASSERT_NE(last_bwd, nullptr);
  last_bwd->uses.push_back({freed_alloc, 0, 1, Role::activation, Access::read, -1, -1});
  EXPECT_THROW(check_schedule(sch), std::logic_error);
}

TEST(ScheduleBufferUses, AUseBeyondTheEndOfItsBufferIsRejected) {
  Scenario s = load_bundled("llama2-7b-zero2-8xa100.yaml", small_overrides(2));
  Schedule sch = make_schedule(s, make_plan(s), 1);
  for (Op& op : sch.ops)
    if (op.kind == OpKind::compute && !op.uses.empty()) {
      op.uses.front().bytes = sch.ops[op.uses.front().alloc].mem.bytes + 1;
      break;
    }
  EXPECT_THROW(check_schedule(sch), std::logic_error);
}

TEST(ScheduleBufferUses, TheScheduleCarriesTheModelItsUnitsCompute) {
  Scenario s = load_bundled("llama2-70b-zero3-64xh100.yaml", small_overrides(2));
  const Plan p = make_plan(s);
  const Schedule sch = make_schedule(s, p, 1);
  ASSERT_EQ(sch.model.units.size(), p.units.size());
  EXPECT_EQ(sch.model.hidden, s.model.hidden);
  EXPECT_EQ(sch.model.kv_heads, s.model.kv_heads);
  EXPECT_EQ(sch.model.layers, 2);
  Elements params = 0;
  for (const ModelUnit& u : sch.model.units)
    for (const ModelTensor& t : u.tensors) params += t.cols == 0 ? t.rows : t.rows * t.cols;
  EXPECT_EQ(params, p.params);
}

// ---- stage 3 ---------------------------------------------------------------------------------------

// What zrun runs at stage 3 today and these checks cover: bf16/fp16 with or without qwZ and hpZ (qgZ and LoCo have their
// own test); no offload (issue 14).
bool plain_stage3(const Plan& p) {
  return p.stage == 3 && !p.qgz && !p.loco && p.param_device == OffloadDevice::none &&
         p.optimizer_device == OffloadDevice::none;
}

std::vector<Variant> stage3_variants() {
  std::vector<Variant> out;
  for (const auto& f : bundled_scenario_files())
    for (const char* fetch : {"deepspeed.zero_optimization.stage3_allgather_sequential=false",
                              "deepspeed.zero_optimization.stage3_allgather_sequential=true",
                              "deepspeed.zero_optimization.stage3_use_all_reduce_for_fetch_params=true",
                              "deepspeed.zero_optimization.stage3_prefetch_bucket_size=0",
                              "deepspeed.zero_optimization.zero_quantized_weights=true",
                              "deepspeed.zero_optimization.zero_hpz_partition_size=2"})
      out.push_back({f, small_overrides(2) + std::vector<std::string>{"deepspeed.zero_optimization.stage=3", fetch,
                                                                      "training.grad_accum=2"}});
  return out;
}

const BufferUse* use_of(const Op& op, Role role) {
  for (const BufferUse& u : op.uses)
    if (u.role == role) return &u;
  return nullptr;
}

TEST(ScheduleBufferUses, EveryStage3CollectiveCopyAndOptimizerOpHasTheUsesItsKindNeeds) {
  int checked = 0;
  for (const Variant& v : stage3_variants()) {
    Scenario s;
    if (!load(v, s)) continue;
    const Plan p = make_plan(s);
    if (!plain_stage3(p)) continue;
    const Schedule sch = make_schedule(s, p, 1);
    ++checked;
    for (const Op& op : sch.ops) {
      const std::string where = v.file + " " + op.name;
      if (op.kind == OpKind::collective) {
        const BufferUse* in = use_of(op, Role::input);
        const BufferUse* out = use_of(op, Role::output);
        if (!out) out = use_of(op, Role::param);  // the all-reduce fetch: its output holds the parameters
        ASSERT_TRUE(in && out) << where;
        const Bytes n = sch.groups[op.collective.group].size;
        switch (op.collective.what) {
          case CollectiveKind::all_gather: EXPECT_EQ(in->total_bytes() * n, out->total_bytes()) << where; break;
          case CollectiveKind::reduce_scatter: EXPECT_EQ(in->total_bytes(), out->total_bytes() * n) << where; break;
          case CollectiveKind::all_reduce: EXPECT_EQ(in->total_bytes(), out->total_bytes()) << where; break;
          default: ADD_FAILURE() << "unexpected collective " << where;
        }
        EXPECT_EQ(out->total_bytes() * (op.collective.what == CollectiveKind::reduce_scatter ? n : 1),
                  op.collective.bytes) << where;
      } else if (op.kind == OpKind::copy) {
        ASSERT_FALSE(op.uses.empty()) << where;
        ASSERT_EQ(op.uses.size() % 2, 0u) << where;
        for (size_t i = 0; i < op.uses.size(); i += 2) {
          EXPECT_EQ(op.uses[i].role, Role::input) << where;
          EXPECT_EQ(op.uses[i + 1].role, Role::output) << where;
          // A cast writes its elements in the target dtype (DeepSpeed's step: the flat 16-bit gradients to fp32).
          if (op.copy.cast)
            EXPECT_EQ(op.uses[i + 1].total_bytes() * dtype_bits(op.copy.cast_from),
                      op.uses[i].total_bytes() * dtype_bits(op.copy.cast_to)) << where;
          // A copy-out drops the padding of the last chunk; nothing else reads less than it writes.
          else
            EXPECT_LE(op.uses[i + 1].total_bytes(), op.uses[i].total_bytes()) << where;
        }
      } else if (op.kind == OpKind::compute && op.compute.what == ComputeKind::quantize) {
        // qwZ: the 16-bit partition in; its int8 values (one byte each) and its scales out.
        ASSERT_EQ(op.uses.size(), 3u) << where;
        EXPECT_EQ(op.compute.dtype, DType::int8) << where;
        EXPECT_EQ(op.uses[0].role, Role::input) << where;
        EXPECT_EQ(op.uses[0].bytes, p.elem_bytes * op.uses[1].bytes) << where;
        EXPECT_EQ(op.uses[2].bytes, 4 * qwz_groups(op.uses[1].bytes)) << where;
      } else if (op.kind == OpKind::compute && op.compute.what == ComputeKind::dequantize) {
        // qwZ: every rank's int8 values and scales in, its 16-bit partition out, one block per rank each.
        ASSERT_EQ(op.uses.size(), 3u) << where;
        EXPECT_EQ(op.uses[2].role, Role::output) << where;
        EXPECT_EQ(op.uses[2].bytes, p.elem_bytes * op.uses[0].bytes) << where;
        for (const BufferUse& u : op.uses) EXPECT_TRUE(u.blocks == p.dp || u.blocks == p.hpz.size) << where;
      } else if (op.kind == OpKind::compute && op.compute.what == ComputeKind::optimizer) {
        const BufferUse* grad = use_of(op, Role::grad);
        const BufferUse* state = use_of(op, Role::state);
        const BufferUse* param = use_of(op, Role::param);
        ASSERT_TRUE(grad && state && param) << where;
        EXPECT_EQ(grad->bytes, param->bytes) << where;
        EXPECT_EQ(state->bytes, p.optimizer_bytes_per_param * (grad->bytes / p.elem_bytes)) << where;
      }
    }
  }
  EXPECT_GT(checked, 10);
}

// A host interpreter of the uses of one step over every rank of an 8-GPU world, written from the documented
// rules (docs/schedule-format.md, "How a runtime reads uses by op kind"), not from the builder. Element values are
// integers: params.partition starts as DeepSpeed's partitioning says (rank r holds elements [r c, (r+1) c) of every
// tensor, c = ceil(numel / 8), padding 0), each rank's backward writes gradient element i of a tensor as
// 1000 x (i + 1) + r, and reductions sum. It checks that every compute op sees every weight whole, that each
// rank's grads.partition ends with the sum over ranks of its chunk of every gradient (times the micro-steps), and
// that the persistent tensors (forgotten when the step begins) are whole again after it. Memory is addressed in
// nibbles (an element's value sits at its first nibble), so the int4 and int8 values and fp32 scales of ZeRO++ sit
// beside 16-bit ones. Quantization is lossless here (an int4 / int8 element holds the value, each scale a marker
// that the dequantizing op checks it reads); qgZ's kernels are emulated as kernels/qgz_quant.hpp documents them
// (partition p at swizzled slot (p % gpus_per_node) x nodes + p / gpus_per_node; a dequant-reduce sums the k chunks
// of m partitions it receives), and collectives run on every group of their shape (intra-node, inter-node).
class Stage3World {
 public:
  Stage3World(const Schedule& sch, const Plan& p, int world) : sch_(sch), p_(p), n_(world), e_(p.elem_bytes) {
    for (size_t u = 0; u < p.units.size(); ++u) {
      ids_.emplace_back();
      for (size_t k = 0; k < p.units[u].tensors.size(); ++k) ids_[u].push_back(next_id_++ * 1'000'000'000LL);
    }
  }

  // The value of element i of tensor (u, k)'s weight (never 0, so that 0 is "zero / padding").
  std::int64_t weight(int u, int k, Elements i) const { return ids_[u][k] + i + 1; }
  std::int64_t grad(Elements i, int rank) const { return 1000 * (i + 1) + rank; }

  void run() {
    for (const Op& op : sch_.ops) {
      // Each step must gather the persistent tensors anew: forget them when its optimizer phase begins.
      if (op.phase == Phase::step && !in_step_) {
        in_step_ = true;
        ++steps_begun_;
        if (persistent_ >= 0)
          for (auto& rank : mem_[persistent_]) std::fill(rank.begin(), rank.end(), 0);
      }
      if (op.phase != Phase::step && op.phase != Phase::init && in_step_) {
        // A new step: grads.partition starts it at zero (its partition copies add; docs/schedule-semantics.md).
        in_step_ = false;
        if (grad_partition_ >= 0 && grad_esz_ == 2 * e_)
          for (auto& rank : mem_[grad_partition_]) std::fill(rank.begin(), rank.end(), 0);
      }
      switch (op.kind) {
        case OpKind::alloc: {
          for (int r = 0; r < n_; ++r) mem_[op.id].push_back(std::vector<std::int64_t>(2 * op.mem.bytes, 0));
          // offload_param nvme: params.partition holds the partition's elements before plan.nvme_params_from
          // (max_in_cpu), params.partition.nvme the rest.
          if (op.mem.buffer == "params.partition") init_partition(partition_ = op.id, 0);
          if (op.mem.buffer == "params.partition.nvme") init_partition(partition_nvme_ = op.id, p_.nvme_params_from);
          if (op.mem.buffer == "params.persistent") init_persistent(op.id);
          if (op.mem.buffer == "optimizer") init_master(op.id);
          if (op.mem.buffer == "grads.partition") grad_partition_ = op.id, grad_esz_ = 2 * e_;
          if (op.mem.buffer == "grads.fp32") grad_partition_ = op.id, grad_esz_ = 8;  // the CPU optimizer's, fp32
          break;
        }
        case OpKind::free: break;  // the check_schedule test covers liveness
        case OpKind::collective: collective(op); break;
        case OpKind::copy: copy(op); break;
        case OpKind::compute: compute(op); break;
      }
    }
  }

  // After run(): rank r's grads.partition (or, with the optimizer offloaded, grads.fp32) chunk of tensor (u, k) holds,
  // per element, the sum over ranks of their gradient, times the micro-steps; params.partition holds each rank's
  // chunk of every weight as the steps' optimizers left it, and params.persistent every persistent tensor whole, as
  // the last step's optimizer left it.
  void expect_results(int micro_steps) const {
    ASSERT_GE(grad_partition_, 0);
    Elements at = 0;  // DeepSpeed's flat partition: every tensor's chunk, model order
    for (size_t u = 0; u < p_.units.size(); ++u)
      for (size_t k = 0; k < p_.units[u].tensors.size(); ++k) {
        const Elements numel = p_.units[u].tensors[k].numel(), c = (numel + n_ - 1) / n_;
        for (int r = 0; r < n_; ++r)
          for (Elements j = 0; j < c && r * c + j < numel; ++j) {
            std::int64_t want = 0;
            for (int q = 0; q < n_; ++q) want += micro_steps * grad(r * c + j, q);
            ASSERT_EQ(mem_.at(grad_partition_)[r][grad_esz_ * (at + j)], want)
                << p_.units[u].name << "#" << k << " rank " << r << " element " << r * c + j;
            ASSERT_EQ(partition_element(r, at + j), updated(static_cast<int>(u), static_cast<int>(k), r * c + j))
                << "params.partition after the step: " << p_.units[u].name << "#" << k << " rank " << r << " element "
                << r * c + j;
          }
        at += c;
      }
    Elements off = 0;
    for (size_t u = 0; u < p_.units.size(); ++u)
      for (size_t k = 0; k < p_.units[u].tensors.size(); ++k) {
        if (!persistent_tensor(u, k)) continue;
        for (int r = 0; r < n_; ++r)
          for (Elements i = 0; i < p_.units[u].tensors[k].numel(); ++i)
            ASSERT_EQ(mem_.at(persistent_)[r][2 * e_ * (off + i)], updated(static_cast<int>(u), static_cast<int>(k), i))
                << p_.units[u].name << "#" << k;
        off += p_.units[u].tensors[k].numel();
      }
  }
  int weight_checks() const { return weight_checks_; }
  int steps() const { return steps_begun_; }
  // What each optimizer step adds to a weight (and its fp32 master): the interpreter's stand-in for Adam.
  static constexpr std::int64_t kUpdate = 7;
  // Element i of tensor (u, k) after the steps begun so far.
  std::int64_t updated(int u, int k, Elements i) const { return weight(u, k, i) + kUpdate * steps_begun_; }

 private:
  bool persistent_tensor(size_t u, size_t k) const {
    for (const TensorShape& t : p_.units[u].gathered_tensors)
      if (t.name == p_.units[u].tensors[k].name) return false;
    return true;
  }
  void init_persistent(OpId id) {
    persistent_ = id;
    Elements off = 0;
    for (size_t u = 0; u < p_.units.size(); ++u)
      for (size_t k = 0; k < p_.units[u].tensors.size(); ++k) {
        if (!persistent_tensor(u, k)) continue;
        for (int r = 0; r < n_; ++r)
          for (Elements i = 0; i < p_.units[u].tensors[k].numel(); ++i)
            mem_[id][r][2 * e_ * (off + i)] = weight(static_cast<int>(u), static_cast<int>(k), i);
        off += p_.units[u].tensors[k].numel();
      }
  }
  // The optimizer buffer: per sub-group [fp32 master | exp_avg | exp_avg_sq] of its elements of this rank's partition;
  // the master starts as the partition's weights (DeepSpeed clones them).
  void init_master(OpId id) {
    std::vector<std::vector<std::int64_t>> part(n_);
    Elements at = 0;
    for (size_t u = 0; u < p_.units.size(); ++u)
      for (size_t k = 0; k < p_.units[u].tensors.size(); ++k) {
        const Elements numel = p_.units[u].tensors[k].numel(), c = (numel + n_ - 1) / n_;
        for (int r = 0; r < n_; ++r)
          for (Elements j = 0; j < c; ++j)
            part[r].push_back(r * c + j < numel ? weight(static_cast<int>(u), static_cast<int>(k), r * c + j) : 0);
        at += c;
      }
    Elements first = 0;
    for (Elements sub : p_.sub_groups) {
      for (int r = 0; r < n_; ++r)
        for (Elements j = 0; j < sub; ++j) mem_[id][r][2 * (12 * first + 4 * j)] = part[r][first + j];
      first += sub;
    }
  }
  // The partition's elements from `first` on that buffer `id` holds (all of them from its start).
  void init_partition(OpId id, Elements first) {
    const Elements end = first + sch_.ops[id].mem.bytes / e_;
    Elements at = 0;
    for (size_t u = 0; u < p_.units.size(); ++u)
      for (size_t k = 0; k < p_.units[u].tensors.size(); ++k) {
        const Elements numel = p_.units[u].tensors[k].numel(), c = (numel + n_ - 1) / n_;
        for (int r = 0; r < n_; ++r)
          for (Elements j = 0; j < c && r * c + j < numel; ++j)
            if (at + j >= first && at + j < end)
              mem_[id][r][2 * e_ * (at + j - first)] = weight(static_cast<int>(u), static_cast<int>(k), r * c + j);
        at += c;
      }
  }
  // Element `at` of rank r's partition, in params.partition or params.partition.nvme.
  std::int64_t partition_element(int r, Elements at) const {
    if (partition_nvme_ >= 0 && at >= p_.nvme_params_from)
      return mem_.at(partition_nvme_)[r][2 * e_ * (at - p_.nvme_params_from)];
    return mem_.at(partition_)[r][2 * e_ * at];
  }
  // Element j (of `esz` nibbles) of a use's range on rank r (blocks; `index`: the rank's index for rank_stride), as a
  // nibble address in its buffer.
  static Bytes address(const BufferUse& u, int index, Elements j, Bytes esz) {
    const Elements per_block = 2 * u.bytes / esz;
    return 2 * (u.offset + index * u.rank_stride + (j / per_block) * u.block_stride) + (j % per_block) * esz;
  }
  std::int64_t& at(const BufferUse& u, int rank, Elements j, Bytes esz, int index) {
    return mem_.at(u.alloc).at(rank).at(static_cast<size_t>(address(u, index, j, esz)));
  }
  std::int64_t& at(const BufferUse& u, int rank, Elements j, Bytes esz) { return at(u, rank, j, esz, rank); }
  std::int64_t& at(const BufferUse& u, int rank, Elements j) { return at(u, rank, j, 2 * e_); }
  static Elements count(const BufferUse& u, Bytes esz) { return 2 * u.total_bytes() / esz; }
  // The members (global ranks, in group order) of rank r's group of `g`'s shape, and r's index among them.
  std::vector<int> members(const ProcessGroup& g, int r, int* index) const {
    const int block = g.size * g.stride, base = r / block * block + r % g.stride;
    *index = r % block / g.stride;
    std::vector<int> m;
    for (int j = 0; j < g.size; ++j) m.push_back(base + j * g.stride);
    return m;
  }
  void collective(const Op& op) {
    const ProcessGroup& g = sch_.groups[op.collective.group];
    if (op.collective.what == CollectiveKind::all_to_all) return all_to_all(op, g);
    const BufferUse* in = use_of(op, Role::input);
    const BufferUse* out = use_of(op, Role::output);
    if (!out) out = use_of(op, Role::param);
    ASSERT_TRUE(in && out) << op.name;
    const Bytes esz = dtype_bits(op.collective.dtype) / 4;
    const Elements nin = count(*in, esz), nout = count(*out, esz);
    std::vector<std::vector<std::int64_t>> src(n_);
    std::vector<int> index(n_);
    for (int r = 0; r < n_; ++r) {
      members(g, r, &index[r]);
      for (Elements j = 0; j < nin; ++j) src[r].push_back(at(*in, r, j, esz, index[r]));
    }
    for (int r = 0; r < n_; ++r) {
      int me = 0;
      const std::vector<int> m = members(g, r, &me);
      for (Elements j = 0; j < nout; ++j) {
        std::int64_t v = 0;
        if (op.collective.what == CollectiveKind::all_gather) v = src[m.at(j / nin)][j % nin];
        else if (op.collective.what == CollectiveKind::reduce_scatter)
          for (int q : m) v += src[q][me * nout + j];
        else
          for (int q : m) v += src[q][j];
        at(*out, r, j, esz, me) = v;
      }
    }
  }
  // Each (input, output) pair: block j of the input (of n equal blocks) goes to member j, block q of the output
  // comes from member q; moved nibble by nibble (values and scales alike).
  void all_to_all(const Op& op, const ProcessGroup& g) {
    ASSERT_EQ(op.uses.size() % 2, 0u) << op.name;
    for (size_t i = 0; i < op.uses.size(); i += 2) {
      const BufferUse &in = op.uses[i], &out = op.uses[i + 1];
      ASSERT_EQ(in.bytes, out.bytes) << op.name;
      const Elements len = count(in, 1), block = len / g.size;
      std::vector<std::vector<std::int64_t>> src(n_);
      for (int r = 0; r < n_; ++r)
        for (Elements j = 0; j < len; ++j) src[r].push_back(at(in, r, j, 1));
      for (int r = 0; r < n_; ++r) {
        int me = 0;
        const std::vector<int> m = members(g, r, &me);
        for (int q = 0; q < g.size; ++q)
          for (Elements j = 0; j < block; ++j) at(out, r, q * block + j, 1) = src[m[q]][me * block + j];
      }
    }
  }
  void copy(const Op& op) {
    ASSERT_EQ(op.uses.size() % 2, 0u) << op.name;
    ASSERT_FALSE(op.uses.empty()) << op.name << " has no uses";
    for (size_t i = 0; i < op.uses.size(); i += 2)
      for (int r = 0; r < n_; ++r) {
        if (op.copy.rank >= 0 && op.copy.rank != r) continue;
        int index = r;  // a copy's rank_stride counts the rank in its group (hpZ's secondary copy), else the world
        if (op.copy.group >= 0) members(sch_.groups[op.copy.group], r, &index);
        const BufferUse &in = op.uses[i], &out = op.uses[i + 1];
        // Element by element, of the training dtype, or of the cast's two dtypes (e.g. 16-bit in, fp32 out).
        const Bytes ein = 2 * (op.copy.cast ? dtype_bits(op.copy.cast_from) / 8 : e_),
                    eout = 2 * (op.copy.cast ? dtype_bits(op.copy.cast_to) / 8 : e_);
        if (op.copy.cast) ASSERT_EQ(count(in, ein), count(out, eout)) << op.name;  // else: the output's elements
        for (Elements j = 0; j < count(out, eout); ++j) {
          const std::int64_t v = at(in, r, j, ein, index);
          if (out.access == Access::read_write) at(out, r, j, eout, index) += v;
          else at(out, r, j, eout, index) = v;
        }
      }
  }
  void compute(const Op& op) {
    if (op.compute.what == ComputeKind::optimizer) {  // master += kUpdate; the 16-bit weights out = the master
      const BufferUse* state = use_of(op, Role::state);
      const BufferUse* param = use_of(op, Role::param);
      ASSERT_TRUE(state && param && use_of(op, Role::grad)) << op.name;
      ASSERT_EQ(state->bytes, 12 * (param->bytes / e_)) << op.name;
      for (int r = 0; r < n_; ++r)
        for (Elements j = 0; j < param->total_bytes() / e_; ++j) {
          std::int64_t& master = at(*state, r, j, 8);
          master += kUpdate;
          at(*param, r, j) = master;
        }
      return;
    }
    if (op.compute.dtype == DType::int4 && (op.compute.what == ComputeKind::quantize ||
                                            op.compute.what == ComputeKind::dequant_reduce))
      return qgz(op);
    if (op.compute.what == ComputeKind::quantize) {  // qwZ: [16-bit in, int8 values out, fp32 scales out]
      ASSERT_EQ(op.uses.size(), 3u) << op.name;
      for (int r = 0; r < n_; ++r) {
        for (Elements j = 0; j < count(op.uses[1], 2); ++j) at(op.uses[1], r, j, 2) = at(op.uses[0], r, j);
        mark_scales(op.uses[2], r);
      }
      return;
    }
    if (op.compute.what == ComputeKind::dequantize) {  // qwZ: [int8 values in, scales in, 16-bit out]
      ASSERT_EQ(op.uses.size(), 3u) << op.name;
      for (int r = 0; r < n_; ++r) {
        expect_scales(op, op.uses[1], r);
        for (Elements j = 0; j < count(op.uses[0], 2); ++j) at(op.uses[2], r, j) = at(op.uses[0], r, j, 2);
      }
      return;
    }
    for (const BufferUse& u : op.uses) {
      if (u.role == Role::param && u.unit >= 0) {
        for (int r = 0; r < n_; ++r)
          for (Elements i = 0; i < u.bytes / e_; ++i)
            ASSERT_EQ(at(u, r, i), updated(u.unit, u.tensor, i))
                << op.name << " reads " << p_.units[u.unit].name << "#" << u.tensor << " element " << i << " rank " << r;
        ++weight_checks_;
      }
      if (u.role == Role::grad && u.access != Access::read && op.compute.what == ComputeKind::backward)
        for (int r = 0; r < n_; ++r)
          for (Elements i = 0; i < u.bytes / e_; ++i) at(u, r, i) = grad(i, r);
    }
  }

  static constexpr std::int64_t kScaleMark = -7;
  void mark_scales(const BufferUse& u, int r) {
    for (Elements j = 0; j < count(u, 8); ++j) at(u, r, j, 8) = kScaleMark;
  }
  void expect_scales(const Op& op, const BufferUse& u, int r) {
    for (Elements j = 0; j < count(u, 8); ++j)
      ASSERT_EQ(at(u, r, j, 8), kScaleMark) << op.name << " reads a scale no quantize wrote, rank " << r;
  }
  // qgZ's int4 ops, per tensor (its uses carry its unit and tensor): the swizzled quantize [16-bit gradient in,
  // values out, scales out], the requantizing dequant-reduce [values in, scales in, values out, scales out] and the
  // final one [values in, scales in, 16-bit partition out]; LoCo's `state` uses leave the values as they are here.
  void qgz(const Op& op) {
    const int nodes = sch_.meta.nodes, L = sch_.meta.gpus_per_node;
    std::map<std::pair<int, int>, std::vector<const BufferUse*>> by_tensor;
    for (const BufferUse& u : op.uses) {
      if (u.role == Role::state) continue;
      ASSERT_GE(u.unit, 0) << op.name << ": a qgZ use names its tensor";
      by_tensor[{u.unit, u.tensor}].push_back(&u);
    }
    ASSERT_FALSE(by_tensor.empty()) << op.name;
    for (const auto& [id, u] : by_tensor) {
      const Elements numel = p_.units[id.first].tensors[id.second].numel(), P = numel / n_;
      for (int r = 0; r < n_; ++r) {
        if (op.compute.what == ComputeKind::quantize) {
          ASSERT_EQ(u.size(), 3u) << op.name;
          for (Elements p = 0; p < n_; ++p)
            for (Elements e = 0; e < P; ++e)
              at(*u[1], r, ((p % L) * nodes + p / L) * P + e, 1) = at(*u[0], r, p * P + e);
          mark_scales(*u[2], r);
          continue;
        }
        expect_scales(op, *u[1], r);
        const Elements m = u.size() == 4 ? nodes : 1, k = count(*u[0], 1) / (m * P);
        for (Elements jj = 0; jj < m; ++jj)
          for (Elements e = 0; e < P; ++e) {
            std::int64_t v = 0;
            for (Elements c = 0; c < k; ++c) v += at(*u[0], r, (c * m + jj) * P + e, 1);
            if (u.size() == 4) at(*u[2], r, jj * P + e, 1) = v;
            else at(*u[2], r, e) = v;
          }
        if (u.size() == 4) mark_scales(*u[3], r);
      }
    }
  }
  const Schedule& sch_;
  const Plan& p_;
  const int n_;
  const Bytes e_;
  std::vector<std::vector<std::int64_t>> ids_;
  std::int64_t next_id_ = 1;
  std::map<OpId, std::vector<std::vector<std::int64_t>>> mem_;  // alloc -> per rank, per element
  OpId persistent_ = -1, grad_partition_ = -1, partition_ = -1, partition_nvme_ = -1;
  Bytes grad_esz_ = 0;     // nibbles per element of the gradient partition (16-bit, or fp32 with the optimizer offloaded)
  bool in_step_ = false;
  int steps_begun_ = 0;
  int weight_checks_ = 0;
};

// A tiny model on 8 GPUs whose tensors mostly do not divide by 8 (padded chunks, ranks with short or no chunk).
Scenario tiny_world8(const std::vector<std::string>& more) {
  return load_scenario(std::string(ZSIM_SOURCE_DIR) + "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                       std::vector<std::string>{"runtime=zrun", "cluster.gpus_per_node=8", "model.hidden=36", "model.ffn_hidden=50",
                                                "model.vocab=99", "model.heads=4", "model.kv_heads=2",
                                                "training.seq_len=16", "training.grad_accum=2"} +
                           more);
}

// The host interpreter over 8 ranks and `steps` steps: the schedule is well formed and every rank's weight bytes
// reach the tensors the compute ops read, and the updates their partitions, exactly.
void expect_every_ranks_bytes_follow_on_8_ranks(const Schedule& sch, const Plan& p, const Scenario& s, int steps) {
  ASSERT_NO_THROW(check_schedule(sch));
  Stage3World w(sch, p, 8);
  w.run();
  ASSERT_EQ(w.steps(), steps);
  w.expect_results(s.training.grad_accum);
  EXPECT_GT(w.weight_checks(), 0);
}

// Stage 3's fetch paths (coalesced, sequential, all-reduce, no prefetch) and persistence (none, the small tensors).
const char* const kFetchPaths[] = {"deepspeed.zero_optimization.stage3_allgather_sequential=false",
                                   "deepspeed.zero_optimization.stage3_allgather_sequential=true",
                                   "deepspeed.zero_optimization.stage3_use_all_reduce_for_fetch_params=true",
                                   "deepspeed.zero_optimization.stage3_prefetch_bucket_size=0"};
const char* const kPersistence[] = {"deepspeed.zero_optimization.stage3_param_persistence_threshold=0",
                                    "deepspeed.zero_optimization.stage3_param_persistence_threshold=100"};

TEST(ScheduleBufferUses, Stage3FetchesAndBucketReductionsPlaceEveryTensorsBytesWhereTheRuleSaysOn8Ranks) {
  for (const char* fetch : kFetchPaths)
    for (const char* persist : kPersistence)
      for (const char* bucket : {"deepspeed.zero_optimization.reduce_bucket_size=500000000",
                                 "deepspeed.zero_optimization.reduce_bucket_size=1000"})
        for (const char* qwz : {"deepspeed.zero_optimization.zero_quantized_weights=false",
                                "deepspeed.zero_optimization.zero_quantized_weights=true"})
          for (const char* hpz : {"deepspeed.zero_optimization.zero_hpz_partition_size=1",
                                  "deepspeed.zero_optimization.zero_hpz_partition_size=4"}) {
        if (std::string(fetch).find("all_reduce") != std::string::npos && std::string(qwz).find("true") != std::string::npos)
          continue;  // DeepSpeed's all-reduce fetch is unquantized: the qwZ flag has no path there
        const Scenario s = tiny_world8({fetch, persist, bucket, qwz, hpz});
        const Plan p = make_plan(s);
        ASSERT_EQ(p.dp, 8);
        ASSERT_TRUE(plain_stage3(p));
        const Schedule sch = make_schedule(s, p, 1);
        Stage3World w(sch, p, 8);
        w.run();
        SCOPED_TRACE(std::string(fetch) + " " + persist + " " + bucket + " " + qwz + " " + hpz);
        w.expect_results(s.training.grad_accum);
        EXPECT_GT(w.weight_checks(), 0);
      }
}


// ZeRO-Infinity's parameter offload on 8 ranks over 2 steps (docs/schedule-format.md, "offload_param"): with
// offload_param cpu or nvme and the optimizer on the GPU, the CPU or NVMe, every fetch path, with and without
// persistent tensors and with sub-groups that cut tensors, the interpreter above follows every rank's weight bytes
// from params.partition (CPU) and params.partition.nvme (through a nvme_read into a pinned param_swap buffer) by h2d
// into the GPU staging buffer, through the gathers into the tensors the compute ops read (the second step reads the
// first step's update), and after each step from the optimizer back into the partition (NVMe: through the pinned
// write-back buffer and a param_nvme_write), exactly; the persistent tensors are gathered anew from the updated
// partitions. With nvme, max_in_cpu puts nothing, a prefix of the sub-groups (so that a tensor straddles the two
// buffers), or everything in CPU memory, as DeepSpeed does.
TEST(ScheduleBufferUses, ParamOffloadMovesEveryRanksWeightsFromTheirTierToTheGatheredTensorsAndBackOn8Ranks) {
  int nvme_runs = 0, split_runs = 0, straddling = 0;
  for (const char* param : {"cpu", "nvme"})
    for (const char* in_cpu : {"0", "1554", "1000000000"})
      for (const char* optimizer : {"none", "cpu", "nvme"})
        for (const char* fetch : kFetchPaths)
          for (const char* persist : kPersistence)
            for (const char* sub : {"deepspeed.zero_optimization.sub_group_size=1000000000",
                                    "deepspeed.zero_optimization.sub_group_size=777"}) {
              if (std::string(param) == "cpu" && std::string(in_cpu) != "0") continue;  // max_in_cpu: NVMe only
              const Scenario s = tiny_world8(
                  {fetch, persist, sub, "cluster.host.memory_bytes=1TiB", "cluster.host.cores=16",
                   "cluster.nvme.bytes=1TiB", "cluster.nvme.read_GBps=2", "cluster.nvme.write_GBps=1",
                   "deepspeed.zero_optimization.offload_param.buffer_size=1000",  // the swap-in pool: 5 x 1 KiB
                   std::string("deepspeed.zero_optimization.offload_param.device=") + param,
                   std::string("deepspeed.zero_optimization.offload_param.max_in_cpu=") + in_cpu,
                   std::string("deepspeed.zero_optimization.offload_optimizer.device=") + optimizer});
              const Plan p = make_plan(s);
              ASSERT_EQ(p.dp, 8);
              const Schedule sch = make_schedule(s, p, 2);
              SCOPED_TRACE(std::string("offload_param ") + param + ", max_in_cpu " + in_cpu + ", offload_optimizer " +
                           optimizer + ", " + fetch + " " + persist + " " + sub);
              expect_every_ranks_bytes_follow_on_8_ranks(sch, p, s, 2);
              // The path itself: on NVMe every h2d of weights reads params.partition or a pinned param_swap buffer
              // that a nvme_read of params.partition.nvme filled, and every weight of a sub-group past max_in_cpu
              // written back goes to params.partition.nvme by a nvme_write.
              if (std::string(param) != "nvme") continue;
              ++nvme_runs;
              OpId cpu_part = -1, nvme_part = -1;
              int reads = 0, writes = 0, h2d_from_swap = 0;
              for (const Op& op : sch.ops) {
                if (op.kind == OpKind::alloc && op.mem.buffer == "params.partition") {
                  cpu_part = op.id;
                  EXPECT_EQ(op.mem.tier, Tier::cpu);
                }
                if (op.kind == OpKind::alloc && op.mem.buffer == "params.partition.nvme") {
                  nvme_part = op.id;
                  EXPECT_EQ(op.mem.tier, Tier::nvme);
                }
                if (op.kind != OpKind::copy) continue;
                const std::string where = op.name;
                if (op.copy.what == CopyKind::nvme_read && op.uses.front().alloc == nvme_part) {
                  ++reads;
                  for (size_t i = 0; i < op.uses.size(); i += 2)
                    EXPECT_EQ(sch.ops[op.uses[i + 1].alloc].mem.detail, "param_swap") << where;
                }
                if (op.copy.what == CopyKind::nvme_write && op.uses[1].alloc == nvme_part) {
                  ++writes;
                  EXPECT_EQ(sch.ops[op.uses[0].alloc].mem.tier, Tier::cpu) << where;
                }
                if (op.copy.what == CopyKind::h2d && op.name.find("param") == std::string::npos &&
                    op.name.find(".h2d") != std::string::npos && sch.ops[op.uses[1].alloc].mem.detail == "prefetch") {
                  bool swap = false, cpu = false;
                  for (size_t i = 0; i < op.uses.size(); i += 2) {
                    const OpId from = op.uses[i].alloc;
                    EXPECT_TRUE(from == cpu_part || sch.ops[from].mem.detail == "param_swap") << where;
                    (from == cpu_part ? cpu : swap) = true;
                  }
                  h2d_from_swap += swap;
                  if (swap && cpu && op.uses.size() == 4) ++straddling;  // one tensor, from both buffers
                }
              }
              const bool all_cpu = p.nvme_params_from == p.optimizer_partition;
              EXPECT_EQ(nvme_part < 0, all_cpu);
              EXPECT_EQ(cpu_part < 0, p.nvme_params_from == 0);
              EXPECT_EQ(reads > 0, !all_cpu);
              EXPECT_EQ(reads, h2d_from_swap);
              int nvme_sub_groups = 0;
              Elements first = 0;
              for (Elements sub_group : p.sub_groups) {
                nvme_sub_groups += first >= p.nvme_params_from;
                first += sub_group;
              }
              EXPECT_EQ(writes, 2 * nvme_sub_groups);
              split_runs += p.nvme_params_from > 0 && !all_cpu;
            }
  EXPECT_EQ(nvme_runs, 144);
  EXPECT_GT(split_runs, 0);
  EXPECT_GT(straddling, 0);
}

// hpZ with offload_param cpu on 8 ranks (hpz groups of 4), two micro-steps over 2 steps: DeepSpeed keeps the secondary
// partition on the offload device (_partition_param_sec: device=self.remote_device), so the forward's hpz_copy goes
// d2h into a CPU buffer, and each gather from it (the backward's, the second micro-step's forward) first copies the
// unit's secondary partitions h2d into a GPU staging buffer (_all_gather_dtype: ds_secondary_tensor.to(device)). The
// interpreter follows every rank's bytes through that path exactly, with the optimizer on the GPU or the CPU, every
// fetch path, with and without qwZ.
TEST(ScheduleBufferUses, HpzWithParamOffloadKeepsTheSecondaryPartitionInCpuMemoryAndGathersFromItOn8Ranks) {
  int runs = 0;
  for (const char* optimizer : {"none", "cpu"})
    for (const char* fetch : kFetchPaths)
      for (const char* qwz : {"deepspeed.zero_optimization.zero_quantized_weights=false",
                              "deepspeed.zero_optimization.zero_quantized_weights=true"}) {
        if (std::string(fetch).find("all_reduce") != std::string::npos && std::string(qwz).find("true") != std::string::npos)
          continue;  // DeepSpeed's all-reduce fetch is unquantized
        const Scenario s = tiny_world8({fetch, qwz, kPersistence[0], "cluster.host.memory_bytes=1TiB",
                                        "cluster.host.cores=16", "deepspeed.zero_optimization.zero_hpz_partition_size=4",
                                        "deepspeed.zero_optimization.offload_param.device=cpu",
                                        std::string("deepspeed.zero_optimization.offload_optimizer.device=") + optimizer});
        const Plan p = make_plan(s);
        ASSERT_TRUE(p.hpz_enabled);
        const Schedule sch = make_schedule(s, p, 2);
        SCOPED_TRACE(std::string("offload_optimizer ") + optimizer + ", " + fetch + " " + qwz);
        expect_every_ranks_bytes_follow_on_8_ranks(sch, p, s, 2);
        int hpz_buffers = 0, hpz_copies = 0, staged_from_hpz = 0;
        for (const Op& op : sch.ops) {
          if (op.kind == OpKind::alloc && op.mem.detail == "hpz") {
            ++hpz_buffers;
            EXPECT_EQ(op.mem.tier, Tier::cpu) << op.name;
          }
          if (op.kind != OpKind::copy) continue;
          if (op.name.find(".hpz_copy") != std::string::npos) {
            ++hpz_copies;
            EXPECT_EQ(op.copy.what, CopyKind::d2h) << op.name;
          }
          if (op.copy.what == CopyKind::h2d && sch.ops[op.uses.front().alloc].mem.detail == "hpz") ++staged_from_hpz;
        }
        EXPECT_GT(hpz_buffers, 0);
        EXPECT_EQ(hpz_copies, hpz_buffers);
        EXPECT_GT(staged_from_hpz, 0);
        ++runs;
      }
  EXPECT_EQ(runs, 14);
}

// offload_param nvme with partitions of at least 1 MiB (DeepSpeed's swappable ones: the MLP's matrices here): each
// is read into a buffer of the swapper's pool (own fetch, recompute module by module, or read ahead) and copied up
// from there, the smaller ones through buffers of their own, and every gather and compute sees exactly the weights the
// last step wrote; with the forward's gathers released after each use or kept for the backward (more buffers held),
// the optimizer on the GPU or the CPU, and nothing or one sub-group in CPU memory (a matrix across the two).
TEST(ScheduleBufferUses, ParamSwapInPoolCarriesEveryPartitionToItsGather) {
  int runs = 0;
  struct Case {
    const char *reuse, *in_cpu, *optimizer;
  };
  for (const auto& [reuse, in_cpu, optimizer] :
       {Case{"0", "0", "cpu"}, Case{"1000000000", "0", "none"}, Case{"0", "700000", "cpu"}}) {
        const Scenario s = load_scenario(
            std::string(ZSIM_SOURCE_DIR) + "/runtime/scenarios/tiny-zero3-1xh100.yaml",
            {"runtime=zrun", "model.layers=1", "model.hidden=256", "model.ffn_hidden=2048", "model.heads=4",
             "model.kv_heads=4",
             "model.vocab=99",
             "training.seq_len=16", "training.grad_accum=2", "cluster.host.memory_bytes=1TiB",
             "cluster.nvme.bytes=1TiB", "cluster.nvme.read_GBps=2", "cluster.nvme.write_GBps=1",
             "deepspeed.zero_optimization.sub_group_size=500000",
             "deepspeed.zero_optimization.offload_param.device=nvme",
             "deepspeed.zero_optimization.offload_param.buffer_count=4",
             "deepspeed.zero_optimization.offload_param.buffer_size=600000",
             std::string("deepspeed.zero_optimization.stage3_max_reuse_distance=") + reuse,
             std::string("deepspeed.zero_optimization.offload_param.max_in_cpu=") + in_cpu,
             std::string("deepspeed.zero_optimization.offload_optimizer.device=") + optimizer});
        SCOPED_TRACE(std::string("reuse ") + reuse + ", max_in_cpu " + in_cpu + ", optimizer " + optimizer);
        const Plan p = make_plan(s);
        const Schedule sch = make_schedule(s, p, 2);
        ASSERT_NO_THROW(check_schedule(sch));
        int pooled = 0;
        for (const Op& op : sch.ops)
          if (op.kind == OpKind::copy && op.copy.what == CopyKind::nvme_read &&
              sch.ops[op.uses[1].alloc].mem.buffer == "params.swap_in")
            ++pooled;
        EXPECT_GT(pooled, 0);
        Stage3World w(sch, p, 1);
        w.run();
        ASSERT_EQ(w.steps(), 2);
        w.expect_results(s.training.grad_accum);
        EXPECT_GT(w.weight_checks(), 0);
        ++runs;
  }
  EXPECT_EQ(runs, 3);
}

// qgZ on 8 ranks as 2 nodes x 4, 4 x 2 and 8 x 1 GPUs (intra-node and inter-node groups of every shape), with and
// without LoCo and qwZ: each rank's grads.partition ends with the sum over ranks of its chunk of every gradient, the
// matrices through the two all-to-all hops, the rest reduce-scattered.
TEST(ScheduleBufferUses, QgzReducesEveryRanksPartitionThroughBothAllToAllHopsOn8Ranks) {
  int quantized_tensors = 0;
  for (const auto& [nodes, per_node] : {std::pair{2, 4}, std::pair{4, 2}, std::pair{8, 1}})
    for (const char* loco : {"", "deepspeed.zero_optimization.zeropp_loco_param.err_beta=0.8"})
      for (const char* more : {"deepspeed.zero_optimization.reduce_bucket_size=500000000",
                               "deepspeed.zero_optimization.reduce_bucket_size=1000",
                               "deepspeed.zero_optimization.zero_quantized_weights=true"}) {
        const std::string shape = "cluster.nodes=" + std::to_string(nodes) + " " + std::to_string(per_node);
        std::vector<std::string> o{"cluster.nodes=" + std::to_string(nodes),
                                   "cluster.gpus_per_node=" + std::to_string(per_node),
                                   "deepspeed.zero_optimization.zero_quantized_gradients=true", more,
                                   "deepspeed.zero_optimization.stage3_param_persistence_threshold=0"};
        if (*loco) o.push_back(loco);
        const Scenario s = tiny_world8(o);
        const Plan p = make_plan(s);
        ASSERT_TRUE(p.qgz) << shape;
        ASSERT_EQ(p.dp, 8);
        ASSERT_EQ(p.loco, *loco != 0);
        const Schedule sch = make_schedule(s, p, 1);
        for (const Op& op : sch.ops)
          if (op.kind == OpKind::compute && op.compute.what == ComputeKind::quantize && op.compute.dtype == DType::int4)
            for (const BufferUse& u : op.uses) quantized_tensors += u.role == Role::input;
        Stage3World w(sch, p, 8);
        w.run();
        SCOPED_TRACE(std::string(shape) + " " + loco + " " + more);
        w.expect_results(s.training.grad_accum);
      }
  EXPECT_GT(quantized_tensors, 0);
}

}  // namespace
}  // namespace zsim
