// Sweep points share a schedule when their ScheduleKeys are equal (sim/cli/sweep_groups.hpp). That is sound only
// if the plan and schedule read nothing of the cluster outside the key: checked on every bundled scenario with
// every other cluster figure changed. And a grouped sweep gives every point exactly the figures of its own
// evaluation (evaluate_sweep_point), fitting or not, valid or not, unrolled or priced by repeated micro-steps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/cli/sweep_groups.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/schedule/schedule_json.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "sim/sweep/sweep.hpp"
#include "tests/pipeline_test_util.hpp"

namespace zsim {
namespace {

using test::bundled_scenario_files;
using test::load_bundled;
using test::operator+;

// Every cluster figure that ScheduleKey leaves out, changed.
Scenario with_other_cluster_figures(Scenario s) {
  ClusterSpec& c = s.cluster;
  c.profile = "changed";
  c.gpu.name = "changed";
  c.gpu.hbm_GBps = c.gpu.hbm_GBps * 0.5 + 1;
  c.gpu.peak_tflops = c.gpu.peak_tflops * 0.5 + 1;
  c.gpu.peak_fp32_tflops = c.gpu.peak_fp32_tflops * 0.5 + 1;
  c.host.cores = c.host.cores * 2 + 1;
  c.nvme.read_GBps = c.nvme.read_GBps * 0.5 + 1;
  c.nvme.write_GBps = c.nvme.write_GBps * 0.5 + 1;
  c.links.nvlink_GBps = c.links.nvlink_GBps * 0.5 + 1;
  c.links.pcie_GBps = c.links.pcie_GBps * 0.5 + 1;
  c.links.ib_GBps = c.links.ib_GBps * 0.5 + 1;
  c.links.nvlink_latency_us += 1;
  c.links.pcie_latency_us += 1;
  c.links.ib_latency_us += 1;
  c.links.ib_oversubscription += 1;
  c.links.nodes_per_leaf = 1;
  c.efficiency.gemm *= 0.5;
  c.efficiency.hbm *= 0.5;
  c.efficiency.cpu_adam_params_per_s_per_core *= 0.5;
  c.efficiency.cpu_adam_node_params_per_s = 3e9;
  c.efficiency.pageable_pcie_fraction *= 0.5;
  c.efficiency.hbm_by_kind.norm = 0.3;
  c.efficiency.launch_us += 3;
  c.efficiency.flash_attention = {0.4, 0.3};
  c.efficiency.gemm_model.max_efficiency = 0.7;
  return s;
}

TEST(SweepGroups, TheScheduleReadsNoClusterFigureOutsideTheKey) {
  for (const std::string& file : bundled_scenario_files()) {
    SCOPED_TRACE(file);
    const Scenario a = load_bundled(file, test::small_overrides(2));
    const Scenario b = with_other_cluster_figures(a);
    ASSERT_TRUE(schedule_key(a) == schedule_key(b));
    EXPECT_EQ(schedule_to_json_text(make_schedule(a, make_plan(a), 2)),
              schedule_to_json_text(make_schedule(b, make_plan(b), 2)));
  }
}

TEST(SweepGroups, TheKeyTellsApartWhatChangesTheScheduleOrItsWalks) {
  const Scenario a = load_bundled("llama2-7b-zero3-16xh100.yaml");
  for (const std::vector<std::string>& change :
       {std::vector<std::string>{"training.micro_batch=2"}, {"deepspeed.zero_optimization.reduce_bucket_size=1e6"},
        {"model.layers=3"}, {"cluster.nodes=4"}, {"cluster.gpu=a100-40gb"}}) {
    SCOPED_TRACE(change[0]);
    EXPECT_FALSE(schedule_key(a) == schedule_key(load_bundled("llama2-7b-zero3-16xh100.yaml", change)));
  }
}

void expect_same_point(const SweepPoint& grouped, const SweepPoint& alone) {
  EXPECT_EQ(grouped.valid, alone.valid);
  EXPECT_EQ(grouped.invalid_reason, alone.invalid_reason);
  EXPECT_EQ(grouped.fits, alone.fits);
  EXPECT_EQ(grouped.overflow_tier, alone.overflow_tier);
  EXPECT_EQ(grouped.rejection, alone.rejection);
  EXPECT_EQ(grouped.step_s, alone.step_s);
  EXPECT_EQ(grouped.tokens_per_s, alone.tokens_per_s);
  EXPECT_EQ(grouped.tflops_per_gpu, alone.tflops_per_gpu);
  EXPECT_EQ(grouped.gpu_peak_bytes, alone.gpu_peak_bytes);
  EXPECT_EQ(grouped.cpu_peak_bytes, alone.cpu_peak_bytes);
  EXPECT_EQ(grouped.cross_node_bytes_per_gpu, alone.cross_node_bytes_per_gpu);
}

TEST(SweepGroups, EveryPointGetsTheFiguresOfItsOwnEvaluation) {
  // Link and efficiency axes share schedules; micro_batch 64 does not fit; grad_accum 16 prices repeated
  // micro-steps once; stage 7 is invalid.
  const std::vector<GridAxis> axes = {
      parse_grid_axis("training.micro_batch=1,64"), parse_grid_axis("training.grad_accum=2,16"),
      parse_grid_axis("deepspeed.zero_optimization.stage=3,7"), parse_grid_axis("cluster.links.ib_GBps=12.5,50"),
      parse_grid_axis("cluster.links.nvlink_GBps=150,450"), parse_grid_axis("cluster.efficiency.gemm=0.5,0.6")};
  const std::string path = std::string(ZSIM_SOURCE_DIR) + "/scenarios/llama2-7b-zero3-16xh100.yaml";
  const std::vector<std::string> base = {"model.layers=4"};
  auto load = [&](const std::vector<std::string>& point) { return load_scenario(path, base + point); };
  PipelineOptions o;
  SweepGroups groups(o);
  const SweepResult r = run_sweep(
      axes, [&](const std::vector<std::string>& p) { return groups.evaluate(load(p)); }, 2, {}, {},
      [&](const std::vector<std::string>& p) { return groups.add_point(load(p)); });
  ASSERT_EQ(r.points.size(), 64u);
  int fit = 0, misfit = 0, invalid = 0;
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const SweepPoint& p = r.points[i];
    SCOPED_TRACE(testing::PrintToString(p.overrides));
    EXPECT_EQ(p.index, i);
    EXPECT_EQ(p.overrides, grid_point(axes, i));
    SweepPoint alone;
    try {
      alone = evaluate_sweep_point(load(p.overrides), o);
    } catch (const std::exception& e) {
      alone.invalid_reason = e.what();
    }
    expect_same_point(p, alone);
    (p.valid ? (p.fits ? fit : misfit) : invalid)++;
  }
  EXPECT_GT(fit, 0);
  EXPECT_GT(misfit, 0);
  EXPECT_GT(invalid, 0);
  // 2 micro-batches x 2 grad_accum at stage 3 (stage 7 never loads): 4 groups; only the grad_accum-2 ones
  // (unrolled) build a schedule, and only once each although 8 points use each.
  EXPECT_EQ(groups.groups(), 4u);
  EXPECT_EQ(groups.schedules_built(), 2u);
}

}  // namespace
}  // namespace zsim
