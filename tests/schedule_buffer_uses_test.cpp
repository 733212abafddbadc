// Schedule version 2: the buffer uses that let a runtime execute compute ops from structured fields alone.
// Over every bundled scenario (and variations of stage, checkpointing and tied heads): every buffer an op
// reads or writes is live at that op, every forward / backward / recompute names the weights of every tensor
// it computes with, and the backward segments of a unit produce each of its gradients exactly once per
// micro-step.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
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

}  // namespace
}  // namespace zsim
