// The speed shortcuts give the same answers as the full paths, bit for bit, on every bundled scenario:
// summarize_throughput() vs summarize(), simulate() told the schedule is checked vs checking it, and a
// sweep point (which skips the full timing report) vs the full pipeline's figures; a sweep point that prices
// repeated micro-steps once, within 1e-9 (tests/repeated_micro_steps_test.cpp has every figure).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/cli/pipeline.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/engine/timing_report.hpp"
#include "sim/scenario/scenario_parse.hpp"

namespace zsim {
namespace {

std::vector<std::string> bundled_scenarios() {
  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator("scenarios"))
    if (e.path().extension() == ".yaml") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST(FastPaths, TheBundledScenariosAreFound) { EXPECT_GE(bundled_scenarios().size(), 5u); }

TEST(FastPaths, ThroughputSummaryEqualsTheFullSummarysThroughputFigures) {
  for (const std::string& path : bundled_scenarios()) {
    SCOPED_TRACE(path);
    const Scenario s = load_scenario(path, std::vector<std::string>{});
    PipelineOptions o;
    o.steps = 2;
    const PipelineResult r = run_pipeline(s, o);
    const TimingReport fast = summarize_throughput(r.schedule, r.time.result);
    const TimingReport& full = r.time.report;
    EXPECT_EQ(fast.steps_simulated, full.steps_simulated);
    EXPECT_EQ(fast.step_s, full.step_s);
    EXPECT_EQ(fast.model_flops_per_gpu, full.model_flops_per_gpu);
    EXPECT_EQ(fast.hardware_flops_per_gpu, full.hardware_flops_per_gpu);
    EXPECT_EQ(fast.tflops_per_gpu, full.tflops_per_gpu);
    EXPECT_EQ(fast.hardware_tflops_per_gpu, full.hardware_tflops_per_gpu);
    EXPECT_EQ(fast.tokens_per_s, full.tokens_per_s);
    EXPECT_EQ(fast.memory_waits, full.memory_waits);
    EXPECT_EQ(fast.memory_overcommits, full.memory_overcommits);
  }
}

TEST(FastPaths, SkippingTheRepeatedScheduleCheckChangesNoOpTiming) {
  for (const std::string& path : bundled_scenarios()) {
    SCOPED_TRACE(path);
    const Scenario s = load_scenario(path, std::vector<std::string>{});
    const PipelineResult r = run_pipeline(s);
    SimOptions checked;
    checked.precision = s.training.precision;
    SimOptions skipped = checked;
    skipped.schedule_checked = true;
    const TimingResult a = simulate(s.cluster, r.schedule, checked);
    const TimingResult b = simulate(s.cluster, r.schedule, skipped);
    ASSERT_EQ(a.ops.size(), b.ops.size());
    for (size_t i = 0; i < a.ops.size(); ++i) {
      EXPECT_EQ(a.ops[i].start_s, b.ops[i].start_s);
      EXPECT_EQ(a.ops[i].end_s, b.ops[i].end_s);
    }
    EXPECT_EQ(a.events, b.events);
  }
}

TEST(FastPaths, ASweepPointThatFitsCarriesTheFullPipelinesFigures) {
  for (const std::string& path : bundled_scenarios()) {
    SCOPED_TRACE(path);
    const Scenario s = load_scenario(path, std::vector<std::string>{});
    const PipelineResult full = run_pipeline(s);
    PipelineOptions unrolled;
    unrolled.repeat_from_micro_steps = 0;  // bit for bit: the repeated micro-steps' path is the next test's
    const SweepPoint p = evaluate_sweep_point(s, unrolled);
    EXPECT_EQ(p.fits, full.report.fits);
    EXPECT_EQ(p.gpu_peak_bytes, full.report.memory.gpu.peak);
    EXPECT_EQ(p.cpu_peak_bytes, full.report.memory.cpu.peak);
    if (!p.fits) continue;  // pruned before timing: see the test after the next
    EXPECT_EQ(p.step_s, full.time.report.step_s);
    EXPECT_EQ(p.tokens_per_s, full.time.report.tokens_per_s);
    EXPECT_EQ(p.tflops_per_gpu, full.time.report.tflops_per_gpu);
    EXPECT_EQ(p.cross_node_bytes_per_gpu, full.report.comm.cross_node_per_gpu.total());
  }
}

// With grad_accum >= 16 a sweep point prices the repeated micro-steps once (sim/cli/repeated_micro_steps.hpp):
// the same memory and comm figures, the step time within 1e-9.
TEST(FastPaths, ASweepPointWithManyMicroStepsCarriesTheFullPipelinesFiguresWithin1e9) {
  const Scenario s = load_scenario("scenarios/llama3-405b-zero-infinity-nvme-8xh100.yaml", std::vector<std::string>{});
  ASSERT_GE(s.training.grad_accum, PipelineOptions{}.repeat_from_micro_steps);
  const PipelineResult full = run_pipeline(s);
  const SweepPoint p = evaluate_sweep_point(s);
  EXPECT_EQ(p.fits, full.report.fits);
  EXPECT_EQ(p.gpu_peak_bytes, full.report.memory.gpu.peak);
  EXPECT_EQ(p.cpu_peak_bytes, full.report.memory.cpu.peak);
  EXPECT_EQ(p.cross_node_bytes_per_gpu, full.report.comm.cross_node_per_gpu.total());
  ASSERT_TRUE(p.fits);
  EXPECT_NEAR(p.step_s, full.time.report.step_s, 1e-9 * full.time.report.step_s);
  EXPECT_NEAR(p.tokens_per_s, full.time.report.tokens_per_s, 1e-9 * full.time.report.tokens_per_s);
}

// Llama 2 70B unsharded (ZeRO-0) needs ~1.1 TB of states per GPU: the memory walk rejects it, and the point is
// neither walked for communication nor timed (its step figures stay 0), while its memory figures are the full
// pipeline's.
TEST(FastPaths, ASweepPointThatDoesNotFitIsRejectedByTheMemoryWalkAloneAndNotTimed) {
  const Scenario s =
      load_scenario("scenarios/llama2-70b-zero3-64xh100.yaml",
                    std::vector<std::string>{"deepspeed.zero_optimization.stage=0"});
  const PipelineResult full = run_pipeline(s);
  ASSERT_FALSE(full.report.fits);
  ASSERT_GT(full.time.report.step_s, 0);
  const SweepPoint p = evaluate_sweep_point(s);
  EXPECT_TRUE(p.valid);
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.overflow_tier, "gpu");
  EXPECT_EQ(p.gpu_peak_bytes, full.report.memory.gpu.peak);
  EXPECT_EQ(p.step_s, 0);
  EXPECT_EQ(p.tokens_per_s, 0);
  EXPECT_EQ(p.cross_node_bytes_per_gpu, 0);
}

}  // namespace
}  // namespace zsim
