// Schedule version 2 at ZeRO stages 1-2: every reduction path of stage_1_and_2.py (the multi-rank all-reduce, the
// per-owner reduce, reduce_scatter: false, contiguous_gradients: false, round_robin_gradients, stage 1 with and
// without overlap_comm) and communication_data_type carry the uses a runtime executes them from.
// A host interpreter of one step over every rank of an 8-GPU world, written from the documented rules
// (docs/schedule-format.md, "How a runtime reads uses by op kind"), not from the builder, runs the uses: memory is
// held in 2-byte slots (an element of 4 bytes keeps its value in its first slot), each rank's backward writes (or
// adds, at stage 1) gradient element i of tensor t as 1000 x id(t, i) + rank, reductions sum (a reduce only on its
// root), copies with a `rank` run on that rank only, casts move a value between element sizes. After the backward,
// each rank's partition of DeepSpeed's flat gradient (stage 1: its range of `grads`; stage 2: `grads.partition`)
// must hold, per element, the sum over ranks and micro-steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "tests/pipeline_test_util.hpp"

namespace zsim {
namespace {

using test::operator+;

class Zero12World {
 public:
  Zero12World(const Schedule& sch, const Plan& p, bool round_robin)
      : sch_(sch), p_(p), n_(p.dp), e_(p.elem_bytes) {
    for (const auto& u : p.units) {
      first_.push_back(static_cast<int>(numel_.size()));
      for (const auto& t : u.tensors) numel_.push_back(t.numel());
    }
    // DeepSpeed's flat order (stage_1_and_2.py __init__): model order, or tensor i dealt to list i mod N
    // (_round_robin_reorder), the lists concatenated.
    std::vector<int> order;
    const int count = static_cast<int>(numel_.size());
    if (round_robin) {
      for (int r = 0; r < n_; ++r)
        for (int i = r; i < count; i += n_) order.push_back(i);
    } else {
      for (int i = 0; i < count; ++i) order.push_back(i);
    }
    offset_.assign(count, 0);
    for (int t : order) {
      offset_[t] = total_;
      total_ += numel_[t];
    }
  }

  // Runs the ops of the first step up to the optimizer (the gradients are complete there).
  void run() {
    for (const Op& op : sch_.ops) {
      if (op.phase == Phase::step) break;
      switch (op.kind) {
        case OpKind::alloc:
          for (int r = 0; r < n_; ++r) mem_[op.id].push_back(std::vector<std::int64_t>((op.mem.bytes + 1) / 2, 0));
          if (op.mem.buffer == "grads") grads_ = op.id;
          if (op.mem.buffer == "grads.partition") grad_partition_ = op.id;
          break;
        case OpKind::free: break;  // check_schedule covers liveness
        case OpKind::collective: collective(op); break;
        case OpKind::copy: copy(op); break;
        case OpKind::compute: compute(op); break;
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  // Rank r's partition P of the flat gradient [r P, (r + 1) P) holds the sums, padding 0.
  void expect_partitions(int micro_steps) const {
    const Elements P = (total_ + 2 * n_ - 1) / (2 * n_) * (2 * n_) / n_;
    std::vector<std::int64_t> want(static_cast<size_t>(P * n_), 0);
    for (size_t t = 0; t < numel_.size(); ++t)
      for (Elements i = 0; i < numel_[t]; ++i)
        for (int q = 0; q < n_; ++q) want[offset_[t] + i] += micro_steps * grad(static_cast<int>(t), i, q);
    const OpId buf = p_.stage == 2 ? grad_partition_ : grads_;
    ASSERT_GE(buf, 0);
    for (int r = 0; r < n_; ++r)
      for (Elements j = 0; j < P; ++j) {
        const Elements in_buf = p_.stage == 2 ? j : r * P + j;
        ASSERT_EQ(mem_.at(buf)[r][in_buf * e_ / 2], want[r * P + j]) << "rank " << r << " flat element " << r * P + j;
      }
  }
  // Stage 3: rank r's grads.partition holds, per tensor in model order, its chunk [r c, (r + 1) c) of c =
  // ceil(numel / N) elements (zero past the tensor's end), summed over ranks and micro-steps.
  void expect_stage3_partitions(int micro_steps) const {
    ASSERT_GE(grad_partition_, 0);
    Elements at_ = 0;
    for (size_t t = 0; t < numel_.size(); ++t) {
      const Elements c = (numel_[t] + n_ - 1) / n_;
      for (int r = 0; r < n_; ++r)
        for (Elements j = 0; j < c; ++j) {
          std::int64_t want = 0;
          if (r * c + j < numel_[t])
            for (int q = 0; q < n_; ++q) want += micro_steps * grad(static_cast<int>(t), r * c + j, q);
          ASSERT_EQ(mem_.at(grad_partition_)[r][(at_ + j) * e_ / 2], want)
              << "tensor " << t << " rank " << r << " element " << r * c + j;
        }
      at_ += c;
    }
  }
  int reductions() const { return reductions_; }

 private:
  std::int64_t grad(int tensor, Elements i, int rank) const {
    return 1000 * (static_cast<std::int64_t>(tensor) * 10'000'000 + i + 1) + rank;
  }
  // The 2-byte slot of byte b of a use's range on rank r (blocks, rank_stride).
  static size_t slot(const BufferUse& u, int rank, Bytes b) {
    return static_cast<size_t>((u.offset + rank * u.rank_stride + (b / u.bytes) * u.block_stride + b % u.bytes) / 2);
  }
  std::int64_t& at(const BufferUse& u, int rank, Bytes b) { return mem_.at(u.alloc).at(rank).at(slot(u, rank, b)); }

  static const BufferUse* use_of(const Op& op, Role role) {
    for (const BufferUse& u : op.uses)
      if (u.role == role) return &u;
    return nullptr;
  }

  void collective(const Op& op) {
    const BufferUse* in = use_of(op, Role::input);
    const BufferUse* out = use_of(op, Role::output);
    ASSERT_TRUE(in && out) << op.name << ": a collective without input / output uses";
    const auto what = op.collective.what;
    if (op.phase != Phase::backward || what == CollectiveKind::all_gather) return;  // weights: not checked here
    ASSERT_TRUE(what == CollectiveKind::all_reduce || what == CollectiveKind::reduce ||
                what == CollectiveKind::reduce_scatter)
        << op.name;
    const Bytes parts = what == CollectiveKind::reduce_scatter ? n_ : 1;  // the input holds the group's chunks
    ASSERT_EQ(in->total_bytes(), parts * out->total_bytes()) << op.name;
    ASSERT_EQ(in->total_bytes(), op.collective.bytes) << op.name;
    ++reductions_;
    const Bytes esz = dtype_bits(op.collective.dtype) / 8;
    std::vector<std::int64_t> sum(static_cast<size_t>(in->total_bytes() / esz), 0);
    for (int r = 0; r < n_; ++r)
      for (size_t j = 0; j < sum.size(); ++j) sum[j] += at(*in, r, j * esz);
    const size_t chunk = sum.size() / parts;
    for (int r = 0; r < n_; ++r) {
      if (what == CollectiveKind::reduce && r != op.collective.root) continue;
      const size_t first = what == CollectiveKind::reduce_scatter ? r * chunk : 0;
      for (size_t j = 0; j < chunk; ++j) at(*out, r, j * esz) = sum[first + j];
    }
  }
  void copy(const Op& op) {
    ASSERT_FALSE(op.uses.empty()) << op.name << ": a copy without uses";
    ASSERT_EQ(op.uses.size() % 2, 0u) << op.name;
    for (int r = 0; r < n_; ++r) {
      if (op.copy.rank >= 0 && op.copy.rank != r) continue;
      for (size_t i = 0; i < op.uses.size(); i += 2) {
        const BufferUse& in = op.uses[i];
        const BufferUse& out = op.uses[i + 1];
        // A cast moves each element between sizes; a plain copy moves bytes (two at a time).
        const Bytes from = op.copy.cast ? dtype_bits(op.copy.cast_from) / 8 : 2;
        const Bytes to = op.copy.cast ? dtype_bits(op.copy.cast_to) / 8 : 2;
        ASSERT_EQ(in.total_bytes() / from, out.total_bytes() / to) << op.name;
        for (Bytes j = 0; j < out.total_bytes() / to; ++j) {
          const std::int64_t v = at(in, r, j * from);
          if (out.access == Access::read_write) at(out, r, j * to) += v;
          else at(out, r, j * to) = v;
          if (to == 4) at(out, r, j * to + 2) = 0;
        }
      }
    }
  }
  void compute(const Op& op) {
    if (op.compute.what != ComputeKind::backward) return;
    for (const BufferUse& u : op.uses) {
      if (u.role != Role::grad || u.access == Access::read || u.unit < 0) continue;
      const int t = first_[u.unit] + u.tensor;
      for (int r = 0; r < n_; ++r)
        for (Elements i = 0; i < u.bytes / e_; ++i) {
          if (u.access == Access::read_write) at(u, r, i * e_) += grad(t, i, r);
          else at(u, r, i * e_) = grad(t, i, r);
        }
    }
  }

  const Schedule& sch_;
  const Plan& p_;
  const int n_;
  const Bytes e_;
  std::vector<int> first_;          // per unit: its first tensor's ordinal
  std::vector<Elements> numel_, offset_;
  Elements total_ = 0;
  std::map<OpId, std::vector<std::vector<std::int64_t>>> mem_;  // alloc -> per rank, per 2-byte slot
  OpId grads_ = -1, grad_partition_ = -1;
  int reductions_ = 0;
};

// The tiny model on 8 GPUs, tensors mostly not divisible by 8, buckets small enough to cut tensors into slices of
// several owners (reduce_bucket_size 1000) or to hold the model (5e8).
Scenario tiny_world8(const std::vector<std::string>& more) {
  return load_scenario(std::string(ZSIM_SOURCE_DIR) + "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                       std::vector<std::string>{"runtime=zrun", "cluster.gpus_per_node=8", "model.hidden=36", "model.ffn_hidden=50",
                                                "model.vocab=99", "model.heads=4", "model.kv_heads=2",
                                                "training.seq_len=16", "training.grad_accum=2"} +
                           more);
}

struct Path {
  const char* name;
  std::vector<std::string> keys;
};

std::vector<Path> paths() {
  return {{"default (multi-rank all-reduce)", {}},
          {"per-owner reduce", {"deepspeed.zero_optimization.use_multi_rank_bucket_allreduce=false"}},
          {"reduce_scatter false", {"deepspeed.zero_optimization.reduce_scatter=false"}},
          {"contiguous_gradients false", {"deepspeed.zero_optimization.contiguous_gradients=false"}},
          {"round robin", {"deepspeed.zero_optimization.round_robin_gradients=true"}},
          {"round robin, per-owner reduce",
           {"deepspeed.zero_optimization.round_robin_gradients=true",
            "deepspeed.zero_optimization.use_multi_rank_bucket_allreduce=false"}},
          {"round robin, reduce_scatter false",
           {"deepspeed.zero_optimization.round_robin_gradients=true", "deepspeed.zero_optimization.reduce_scatter=false"}}};
}

// Returns how many reductions ran in a staging bucket (stage 1, round robin: gradients not one range of `grads`).
int expect_path_reduces_every_partition(int stage, bool overlap, const Path& path, const std::string& bucket,
                                        const std::string& comm) {
  std::vector<std::string> keys = {"deepspeed.zero_optimization.stage=" + std::to_string(stage),
                                   std::string("deepspeed.zero_optimization.overlap_comm=") + (overlap ? "true" : "false"),
                                   "deepspeed.zero_optimization.reduce_bucket_size=" + bucket};
  if (!comm.empty()) keys.push_back("deepspeed.communication_data_type=" + comm);
  const Scenario s = tiny_world8(keys + path.keys);
  const Plan p = make_plan(s);
  EXPECT_EQ(p.dp, 8);
  const Schedule sch = make_schedule(s, p, 1);
  EXPECT_NO_THROW(check_schedule(sch));
  SCOPED_TRACE(std::string(path.name) + ", stage " + std::to_string(stage) + (overlap ? ", overlap" : "") +
               ", bucket " + bucket + (comm.empty() ? "" : ", communication_data_type " + comm));
  Zero12World w(sch, p, s.zero.round_robin_gradients);
  w.run();
  if (::testing::Test::HasFatalFailure()) return 0;
  w.expect_partitions(s.training.grad_accum);
  EXPECT_GT(w.reductions(), 0);
  int staged = 0;
  for (const Op& op : sch.ops) staged += op.kind == OpKind::copy && op.name.ends_with(".to_bucket");
  return staged;
}

// Buckets of 1000 and 3000 elements cut the model into slices of several owners and, with round robin at stage 1,
// into calls whose gradients are not one range of `grads` (staged through a bucket buffer); 5e8 holds the model.
TEST(Zero12ReductionUses, EveryReductionPathReducesEveryRanksPartitionOn8Ranks) {
  int staged = 0;
  for (int stage : {1, 2})
    for (bool overlap : {false, true})
      for (const Path& path : paths())
        for (const char* bucket : {"1000", "3000", "500000000"})
          staged += expect_path_reduces_every_partition(stage, overlap, path, bucket, "");
  EXPECT_GT(staged, 0);
}

// communication_data_type fp32 with bf16 training: every reduction casts into an fp32 buffer and back.
TEST(Zero12ReductionUses, Fp32CommunicationCastsEveryReductionAndBackOn8Ranks) {
  for (int stage : {1, 2})
    for (bool overlap : {false, true})
      for (const Path& path : paths())
        for (const char* bucket : {"1000", "3000"}) expect_path_reduces_every_partition(stage, overlap, path, bucket, "fp32");
}

// Every bundled scenario at stages 1 and 2 on every path, with and without fp32 communication (2 micro-steps): the
// schedule passes check_schedule and every reduction collective and copy of the backward names its buffers.
TEST(Zero12ReductionUses, EveryPathOfEveryBundledScenarioNamesTheBuffersOfEveryReductionOp) {
  int checked = 0;
  for (const auto& f : test::bundled_scenario_files())
    for (const char* stage : {"1", "2"})
      for (const Path& path : paths())
        for (const char* comm : {"", "fp32"}) {
          std::vector<std::string> keys = test::small_overrides(2) + path.keys +
                                          std::vector<std::string>{std::string("deepspeed.zero_optimization.stage=") + stage,
                                                                   "training.grad_accum=2"};
          if (*comm) keys.push_back(std::string("deepspeed.communication_data_type=") + comm);
          Scenario s;
          try {
            s = test::load_bundled(f, keys);
          } catch (const std::exception&) {
            continue;  // a scenario that does not validate at this stage (e.g. parameter offload)
          }
          const Plan p = make_plan(s);
          if (p.optimizer_device != OffloadDevice::none) continue;  // zrun has no CPU Adam (issue 14)
          const Schedule sch = make_schedule(s, p, 1);
          ASSERT_NO_THROW(check_schedule(sch)) << f;
          ++checked;
          for (const Op& op : sch.ops)
            if (op.phase == Phase::backward && (op.kind == OpKind::collective || op.kind == OpKind::copy))
              EXPECT_FALSE(op.uses.empty()) << f << " " << path.name << " stage " << stage << " " << comm << ": "
                                            << op.name;
        }
  EXPECT_GT(checked, 20);
}

// Stage 3 with communication_data_type fp32 (stage3.py __avg_scatter_grads): the bucket cast to fp32, interleaved
// and reduce-scattered in fp32, the rank's chunks cast back and added into grads.partition.
TEST(Zero12ReductionUses, Stage3Fp32CommunicationCastsTheBucketAndTheReducedChunksBackOn8Ranks) {
  for (const char* comm : {"bf16", "fp32"})
    for (const char* bucket : {"1000", "500000000"}) {
      const Scenario s = tiny_world8({"deepspeed.zero_optimization.stage=3",
                                      std::string("deepspeed.communication_data_type=") + comm,
                                      std::string("deepspeed.zero_optimization.reduce_bucket_size=") + bucket});
      const Plan p = make_plan(s);
      const Schedule sch = make_schedule(s, p, 1);
      ASSERT_NO_THROW(check_schedule(sch));
      SCOPED_TRACE(std::string("communication_data_type ") + comm + ", bucket " + bucket);
      int casts = 0;
      for (const Op& op : sch.ops) casts += op.kind == OpKind::copy && op.copy.cast;
      EXPECT_EQ(casts > 0, std::string(comm) == "fp32");
      Zero12World w(sch, p, false);
      w.run();
      if (::testing::Test::HasFatalFailure()) return;
      w.expect_stage3_partitions(s.training.grad_accum);
      EXPECT_GT(w.reductions(), 0);
    }
}

}  // namespace
}  // namespace zsim
