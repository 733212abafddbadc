// Schedule version 2, ZeRO-Offload (docs/schedule-format.md, "Optimizer offload"): on 4 ranks with 2 micro-steps,
// stages 1-3, optimizer on the CPU or NVMe, the reduced gradients reach the CPU optimizer as DeepSpeed moves them:
// converted to fp32 on the GPU (a cast op) and copied down in fp32 at the accumulation boundary, so that every
// element of a rank's fp32 gradients is written exactly once per step, from fp32 bytes; no copy between tiers
// converts (its input and output are the same bytes); and each rank's CPU Adam sub-groups read exactly the fp32
// gradients it holds. Checked from the documented rules over every rank, not from the builder.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>
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

// The fp32 gradients come from a cast on the GPU, or (DeepSpeed 0.14.5 at stage 3: a blocking copy_ into the CPU's
// fp32 gradient) from a d2h of the 16-bit GPU copy that the CPU converts.
TEST(OffloadUses, EachFp32GradientIsWrittenOncePerStepFromAConversionAndCpuAdamReadsThemAll) {
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
    const std::string where = c.file + " stage " + std::to_string(p.stage) + " " + c.overrides[1];
    OpId fp32 = -1;
    for (const Op& op : sch.ops)
      if (op.kind == OpKind::alloc && op.mem.buffer == "grads.fp32") fp32 = op.id;
    ASSERT_GE(fp32, 0) << where;
    const Elements held = sch.ops[fp32].mem.bytes / 4;
    // Ranges (buffer, offset, bytes) that hold a cast's fp32 output, or a copy of one.
    std::set<std::tuple<OpId, Bytes, Bytes>> converted;
    std::vector<std::vector<int>> writes(n, std::vector<int>(held, 0));
    std::vector<std::vector<char>> adam_read(n, std::vector<char>(held, 0));
    std::set<OpId> swapped_in;  // host buffers an nvme_read filled from grads.fp32
    int casts = 0;
    for (const Op& op : sch.ops) {
      if (op.kind == OpKind::copy && op.copy.cast && op.copy.cast_to == DType::fp64) continue;  // a gradient's norm
      // DeepSpeed 0.14.5's stages 1-2: the fp32 master, brought up, cast into the 16-bit weights (not a gradient).
      if (op.kind == OpKind::copy && op.copy.cast && op.phase == Phase::step && op.copy.cast_from == DType::fp32)
        continue;
      if (op.kind == OpKind::copy && op.copy.cast) {
        ASSERT_EQ(op.uses.size(), 2u) << where << " " << op.name;
        ASSERT_EQ(op.copy.cast_to, DType::fp32) << where << " " << op.name;
        ASSERT_EQ(sch.ops[op.uses[1].alloc].mem.tier, Tier::gpu) << where << " " << op.name;
        ASSERT_EQ(op.uses[1].bytes, 4 * (op.uses[0].bytes / p.elem_bytes)) << where << " " << op.name;
        converted.insert({op.uses[1].alloc, op.uses[1].offset, op.uses[1].bytes});
        ++casts;
        continue;
      }
      if (op.kind == OpKind::copy && op.copy.what != CopyKind::d2d) {
        ASSERT_EQ(op.uses.size() % 2, 0u) << where << " " << op.name;
        for (size_t i = 0; i + 1 < op.uses.size(); i += 2) {
          const BufferUse& in = op.uses[i];
          const BufferUse& out = op.uses[i + 1];
          const bool cpu_conversion = out.alloc == fp32 && op.copy.what == CopyKind::d2h &&
                                      sch.ops[in.alloc].mem.tier == Tier::gpu &&
                                      out.total_bytes() == 4 * (in.total_bytes() / p.elem_bytes);
          if (!cpu_conversion)
            EXPECT_EQ(in.total_bytes(), out.total_bytes()) << where << " " << op.name << ": a copy between tiers converts";
          casts += cpu_conversion;
          const bool from_gpu_conversion = cpu_conversion || converted.count({in.alloc, in.offset, in.bytes}) > 0;
          if (from_gpu_conversion) converted.insert({out.alloc, out.offset, out.bytes});
          if (out.alloc == fp32) {
            EXPECT_EQ(out.access, Access::write) << where << " " << op.name;
            EXPECT_TRUE(from_gpu_conversion) << where << " " << op.name << ": not the fp32 of a cast on the GPU";
            EXPECT_EQ(op.micro_step, s.training.grad_accum - 1) << where << " " << op.name << " before the boundary";
            for (int r = 0; r < n; ++r) {
              if (op.copy.rank >= 0 && op.copy.rank != r) continue;
              for (Elements e = out.offset / 4; e < (out.offset + out.bytes) / 4; ++e) ++writes[r][e];
            }
          }
          if (in.alloc == fp32 && op.copy.what == CopyKind::nvme_read) swapped_in.insert(out.alloc);
        }
      }
      if (op.kind == OpKind::compute && op.compute.device == Device::cpu && op.name.ends_with(".unscale")) {
        const BufferUse* g = use_of(op, Role::grad);  // DeepSpeed's unscale: Adam's gradients, in place
        ASSERT_TRUE(g && g->access == Access::read_write) << where << " " << op.name;
        continue;
      }
      if (op.kind == OpKind::compute && op.compute.device == Device::cpu) {
        const BufferUse* g = use_of(op, Role::grad);
        ASSERT_TRUE(g && use_of(op, Role::state) && use_of(op, Role::param)) << where << " " << op.name;
        Bytes first = g->offset;
        if (g->alloc != fp32) {
          // Swapped in with the state: the sub-group's gradients, read from grads.fp32 into this swap buffer (stage 3:
          // the swapper's pool, which every sub-group reuses: the last read into the gradients' place before it).
          ASSERT_TRUE(swapped_in.count(g->alloc)) << where << " " << op.name;
          for (OpId id = 0; id < op.id; ++id) {
            const Op& r = sch.ops[id];
            if (r.kind == OpKind::copy && r.copy.what == CopyKind::nvme_read && r.uses.size() == 2 &&
                r.uses[0].alloc == fp32 && r.uses[1].alloc == g->alloc && r.uses[1].offset == g->offset)
              first = r.uses[0].offset;
          }
        }
        for (int r = 0; r < n; ++r)
          for (Elements e = first / 4; e < (first + g->bytes) / 4; ++e) adam_read[r][e] = 1;
      }
    }
    EXPECT_GT(casts, 0) << where;
    // Every element a rank's partition holds: written once (stages 1-2: the flat partition's padding is never a
    // gradient, so at most once), and optimized.
    for (int r = 0; r < n; ++r)
      for (Elements e = 0; e < held; ++e) {
        if (p.stage == 3) ASSERT_EQ(writes[r][e], 1) << where << " rank " << r << " element " << e;
        else ASSERT_LE(writes[r][e], 1) << where << " rank " << r << " element " << e;
        ASSERT_TRUE(adam_read[r][e]) << where << " rank " << r << " element " << e << " is never optimized";
      }
    ++checked;
  }
  EXPECT_EQ(checked, 18);
}

}  // namespace
}  // namespace zsim
