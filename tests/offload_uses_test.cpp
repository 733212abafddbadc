// Schedule version 2, ZeRO-Offload (docs/schedule-format.md, "Optimizer offload"): on 4 ranks with 2 micro-steps,
// stages 1-3, optimizer on the CPU or NVMe, the copies of reduced gradients down to grads.fp32 give every gradient
// element exactly one fp32 place on one rank per reduction (written first, then added), each rank's CPU Adam
// sub-groups read exactly the fp32 gradients it holds, and the 16-bit weights go back where the optimizer's
// elements are. Checked from the documented rules over every rank, not from the builder.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "tests/pipeline_test_util.hpp"

namespace zsim {
namespace {

using test::load_bundled;
using test::operator+;

const BufferUse* use_of(const Op& op, Role role) {
  for (const BufferUse& u : op.uses)
    if (u.role == role) return &u;
  return nullptr;
}

struct Case {
  std::string file;
  std::vector<std::string> overrides;
};

std::vector<Case> cases() {
  // The tiny offload scenario (bundled scenarios are too wide to check element by element in a unit test), plain,
  // with a tied head, biases and a plain MLP, and with several optimizer sub-groups (stage 3).
  const std::vector<std::vector<std::string>> models{
      {}, {"model.tie_word_embeddings=true", "model.bias=true", "model.mlp=plain"},
      {"deepspeed.zero_optimization.sub_group_size=300000"}};
  std::vector<Case> out;
  for (const auto& model : models)
    for (const char* stage : {"1", "2", "3"})
      for (const char* dev : {"cpu", "nvme"})
        out.push_back({"../runtime/scenarios/tiny-zero3-offload-1xh100.yaml",
                       model + std::vector<std::string>{
                                   std::string("deepspeed.zero_optimization.stage=") + stage,
                                   std::string("deepspeed.zero_optimization.offload_optimizer.device=") + dev,
                                   "cluster.gpus_per_node=4", "training.grad_accum=2"}});
  return out;
}

TEST(OffloadUses, ReducedGradientsLandOnceInOneRanksFp32GradientsAndCpuAdamReadsThemAll) {
  int checked = 0;
  for (const Case& c : cases()) {
    Scenario s;
    try {
      s = load_bundled(c.file, c.overrides);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.file << ": " << e.what();
      continue;
    }
    const Plan p = make_plan(s);
    const Schedule sch = make_schedule(s, p, 1);
    ASSERT_NO_THROW(check_schedule(sch)) << c.file;
    const int n = p.dp;
    ASSERT_EQ(n, 4);
    const std::string where = c.file + " stage " + std::to_string(p.stage);
    OpId fp32 = -1;
    for (const Op& op : sch.ops)
      if (op.kind == OpKind::alloc && op.mem.buffer == "grads.fp32") fp32 = op.id;
    ASSERT_GE(fp32, 0) << where;
    const Elements held = sch.ops[fp32].mem.bytes / 4;
    // Per rank and fp32 element: writes in the current reduction round (a micro-step; stage 1 reduces once).
    std::vector<std::vector<int>> writes(n, std::vector<int>(held, 0));
    std::vector<std::vector<char>> adam_read(n, std::vector<char>(held, 0));
    std::map<int, Elements> landed;  // micro-step -> gradient elements copied down, all ranks together
    for (const Op& op : sch.ops) {
      if (op.kind == OpKind::copy && op.copy.what == CopyKind::d2h) {
        ASSERT_FALSE(op.uses.empty()) << where << " " << op.name;
        for (int r = 0; r < n; ++r) {
          if (op.copy.rank >= 0 && op.copy.rank != r) continue;
          for (size_t i = 0; i + 1 < op.uses.size(); i += 2) {
            const BufferUse& in = op.uses[i];
            const BufferUse& out = op.uses[i + 1];
            ASSERT_EQ(out.alloc, fp32) << where << " " << op.name;
            ASSERT_EQ(out.bytes, 4 * (in.bytes / p.elem_bytes)) << where << " " << op.name;
            for (Elements e = out.offset / 4; e < (out.offset + out.bytes) / 4; ++e) {
              const int before = writes[r][e]++;
              // The first copy into an element in the step writes it, later micro-steps add.
              EXPECT_EQ(out.access, before == 0 && op.micro_step == (p.stage == 1 ? 1 : 0) ? Access::write
                                                                                             : Access::read_write)
                  << where << " " << op.name << " rank " << r << " element " << e;
            }
            landed[op.micro_step] += in.bytes / p.elem_bytes;
          }
        }
      }
      if (op.kind == OpKind::compute && op.compute.device == Device::cpu) {
        const BufferUse* g = use_of(op, Role::grad);
        ASSERT_TRUE(g && use_of(op, Role::state) && use_of(op, Role::param)) << where << " " << op.name;
        for (int r = 0; r < n; ++r)
          for (Elements e = g->offset / 4; e < (g->offset + g->bytes) / 4; ++e) adam_read[r][e] = 1;
      }
      if (op.kind == OpKind::copy && op.copy.what == CopyKind::h2d) {
        ASSERT_EQ(op.uses.size(), 2u) << where << " " << op.name;
        EXPECT_EQ(op.uses[1].bytes, op.uses[0].bytes) << where << " " << op.name;
      }
    }
    // Every gradient element of the model (stage 3: every rank's chunk, padding included) once per reduction.
    Elements per_round = 0;
    for (const auto& u : p.units)
      for (const auto& t : u.tensors) per_round += p.stage == 3 ? n * ((t.numel() + n - 1) / n) : t.numel();
    EXPECT_EQ(landed.size(), p.stage == 1 ? 1u : 2u) << where;
    for (const auto& [micro, elements] : landed) EXPECT_EQ(elements, per_round) << where << " micro-step " << micro;
    for (int r = 0; r < n; ++r)
      for (Elements e = 0; e < held; ++e) {
        ASSERT_LE(writes[r][e], p.stage == 1 ? 1 : 2) << where << " rank " << r << " element " << e;
        ASSERT_TRUE(adam_read[r][e]) << where << " rank " << r << " element " << e << " is never optimized";
      }
    ++checked;
  }
  EXPECT_EQ(checked, 18);
}

}  // namespace
}  // namespace zsim
