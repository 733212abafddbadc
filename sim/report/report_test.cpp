// Specification of make_report: the report's figures are the schedule walks', with the scenario's
// capacities, and its verdict and warnings follow from them.
#include "sim/report/report.hpp"

#include <gtest/gtest.h>

#include "sim/report/report_test_fixture.hpp"

using namespace zsim;
using namespace zsim::testing;
using S = SmallStep;

TEST(Report, GpuPeakIsTheClosedFormPeakOfTheHandBuiltStep) {
  const Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  EXPECT_EQ(r.memory.gpu.peak, S::kGpuPeak);
  EXPECT_EQ(r.memory.gpu.peak_op_name, "alloc.bucket.L1");
  EXPECT_EQ(r.memory.gpu.at_peak.buffer_detail.at("gathered"), S::kLayer);
  EXPECT_EQ(r.memory.gpu.at_peak.buffer_detail.at("bucket"), S::kLayer);
}

TEST(Report, CpuOptimizerStatesArePerNode) {
  const Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  EXPECT_EQ(r.memory.cpu.peak, S::kGpn * 12 * S::kP / S::kN);
  EXPECT_EQ(r.memory.cpu.at_peak.optimizer, r.memory.cpu.peak);
  EXPECT_EQ(r.memory.nvme.peak, 0);
}

TEST(Report, CapacitiesComeFromTheScenario) {
  const Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  EXPECT_EQ(r.memory.gpu.capacity, 80 * kGiB);
  EXPECT_EQ(r.memory.cpu.capacity, 1 * kGiB);
  EXPECT_EQ(r.memory.nvme.capacity, 4 * kGiB);
}

TEST(Report, FitsWhenEveryTierHoldsItsPeak) {
  const Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  EXPECT_TRUE(r.fits);
  EXPECT_FALSE(r.memory.first_overflow.has_value());
}

TEST(Report, DoesNotFitWhenTheGpuPeakExceedsHbm) {
  Scenario sc = small_scenario(S::kGpuPeak - 1, OffloadDevice::cpu);
  sc.runtime = RuntimeKind::zrun;  // the verdict reads the peak (zrun's arena)
  const Report r = make_report(sc, small_step(Tier::cpu));
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.memory.gpu.headroom(), -1);
  ASSERT_TRUE(r.memory.first_overflow.has_value());
  EXPECT_EQ(r.memory.first_overflow->tier, Tier::gpu);
}

// Issue 38: what runs out on a GPU under DeepSpeed is what PyTorch's caching allocator reserves plus what the process
// holds outside it (CUDA context, NCCL), not the allocated peak.
TEST(Report, UnderDeepSpeedAGpuWhoseAllocatedPeakFitsButReservedPlusOutsideDoesNotDoesNotFit) {
  Scenario sc = small_scenario(S::kGpuPeak, OffloadDevice::cpu);  // the allocated peak fits exactly
  ASSERT_EQ(sc.runtime, RuntimeKind::deepspeed);
  sc.cluster.efficiency.outside_allocator_bytes = 0;  // nothing outside: the reserved peak alone
  const Report r = make_report(sc, small_step(Tier::cpu));
  EXPECT_EQ(r.memory.gpu.peak, S::kGpuPeak);
  EXPECT_GT(r.memory.gpu.reserved, S::kGpuPeak);  // whole segments
  EXPECT_EQ(r.memory.gpu.verdict_bytes(), r.memory.gpu.reserved);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.memory.gpu.headroom(), S::kGpuPeak - r.memory.gpu.reserved);

  // With room for the reserved peak but not for what lies outside the allocator besides: still no.
  const Bytes reserved = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu)).memory.gpu.reserved;
  sc = small_scenario(reserved + 256 * kMiB, OffloadDevice::cpu);
  sc.cluster.efficiency.outside_allocator_bytes = 512 * kMiB;
  const Report o = make_report(sc, small_step(Tier::cpu));
  EXPECT_LE(o.memory.gpu.peak, o.memory.gpu.capacity);
  EXPECT_EQ(o.memory.gpu.outside_allocator, 512 * kMiB);
  EXPECT_GT(o.memory.gpu.verdict_bytes(), o.memory.gpu.capacity);
  EXPECT_FALSE(o.fits);

  // Room for both: fits, with the headroom on reserved + outside.
  sc = small_scenario(reserved + 512 * kMiB, OffloadDevice::cpu);
  sc.cluster.efficiency.outside_allocator_bytes = 512 * kMiB;
  const Report f = make_report(sc, small_step(Tier::cpu));
  EXPECT_TRUE(f.fits);
  EXPECT_EQ(f.memory.gpu.reserved, reserved);
  EXPECT_EQ(f.memory.gpu.headroom(), 0);
}

TEST(Report, UnderZrunTheGpuVerdictStillReadsTheAllocatedPeak) {
  Scenario sc = small_scenario(S::kGpuPeak, OffloadDevice::cpu);
  sc.runtime = RuntimeKind::zrun;
  sc.cluster.efficiency.outside_allocator_bytes = 512 * kMiB;  // a DeepSpeed figure: zrun's verdict ignores it
  const Report r = make_report(sc, small_step(Tier::cpu));
  EXPECT_EQ(r.memory.gpu.reserved, 0);
  EXPECT_EQ(r.memory.gpu.outside_allocator, 0);
  EXPECT_EQ(r.memory.gpu.verdict_bytes(), S::kGpuPeak);
  EXPECT_TRUE(r.fits);
  EXPECT_EQ(r.memory.gpu.headroom(), 0);
}

TEST(Report, CommIsTheWalkOfTheSchedule) {
  const Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  // ZeRO-3: forward all-gather, backward all-gather and reduce-scatter of the model's kLayer x 2 bytes.
  const Bytes M = 2 * S::kLayer;
  EXPECT_EQ(r.comm.per_gpu.total(), 3 * M * (S::kN - 1) / S::kN);
  EXPECT_EQ(r.comm.cross_node_per_node_total(), 3 * M * (S::kNodes - 1) / S::kNodes);
  EXPECT_EQ(r.comm.d2h.step, S::kGradShard);
  EXPECT_EQ(r.comm.h2d.step, S::kParamShard);
}

TEST(Report, SetupNamesModelClusterAndZeroFeatures) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  sc.zero.zero_quantized_weights = true;
  sc.zero.zero_hpz_partition_size = 4;
  const Report r = make_report(sc, small_step(Tier::cpu));
  EXPECT_EQ(r.setup.model, "tiny");
  EXPECT_EQ(r.setup.params, S::kP);
  EXPECT_EQ(r.setup.world_size, S::kN);
  EXPECT_EQ(r.setup.zero_stage, 3);
  EXPECT_EQ(r.setup.features, (std::vector<std::string>{"qwZ", "hpZ=4", "offload_optimizer=cpu"}));
}

TEST(Report, KeepsTheScenarioWarningsFirst) {
  const Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("round_robin_gradients"), std::string::npos);
  EXPECT_EQ(r.scenario_warnings, 1u);
}

TEST(Report, WarnsWhenATierIsUsedButHasNoCapacity) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::nvme);
  sc.cluster.nvme.bytes = 0;
  const Report r = make_report(sc, small_step(Tier::nvme));
  EXPECT_FALSE(r.fits);
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_NE(r.warnings[1].find("cluster.nvme.bytes"), std::string::npos);
}

TEST(Report, WarnsWhenTheScheduleWasPlannedForAnotherCluster) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  sc.cluster.nodes = 4;
  const Report r = make_report(sc, small_step(Tier::cpu));
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_NE(r.warnings[1].find("2 x 4 GPUs but the scenario describes 4 x 4"), std::string::npos);
}

TEST(Report, SaysWhenAGemmModelNotFittedOnAttentionShapesKeepsTheOlderCorePricing) {
  // A schedule whose attn.o lists eager attention's core calls, timed with a calibrated GEMM model fitted without
  // them: the report says the core keeps its unit's GEMM efficiency. Fitted with them, or no model at all: silent.
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  Schedule s = small_step(Tier::cpu);
  s.model.units.push_back({"L0.attn.o", 0, {{"attn.o", 64, 64}}, "softmax", {{128, 128, 64, 2, 1}}, {}});
  auto warned = [&] {
    for (const std::string& w : make_report(sc, s).warnings)
      if (w.find("attention_shapes is false") != std::string::npos) return true;
    return false;
  };
  EXPECT_FALSE(warned());  // data sheet: no GEMM model
  sc.cluster.efficiency.gemm_model.max_efficiency = 0.8;
  EXPECT_TRUE(warned());
  sc.cluster.efficiency.gemm_model.attention_shapes = true;
  EXPECT_FALSE(warned());
  sc.cluster.efficiency.gemm_model.attention_shapes = false;
  s.model.units.back().forward_gemms.clear();  // flash attention: no core calls
  EXPECT_FALSE(warned());
}

TEST(Report, RejectsABrokenSchedule) {
  Schedule s = small_step(Tier::cpu);
  s.ops[5].deps = {40};
  EXPECT_THROW(make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), s), std::logic_error);
}

// Issue 59: under DeepSpeed, a scenario and profile that give no figure for what lies outside the allocator get zsim's
// default for a DeepSpeed process (never a silent 0), and the report says it is the default.
TEST(Report, UnderDeepSpeedWithoutAnOutsideFigureTheVerdictAddsTheDefaultAndSaysSo) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  ASSERT_FALSE(sc.cluster.efficiency.outside_allocator_bytes.has_value());
  const Report r = make_report(sc, small_step(Tier::cpu));
  EXPECT_EQ(r.memory.gpu.outside_allocator, kDeepSpeedOutsideAllocatorDefaultBytes);
  EXPECT_TRUE(r.memory.gpu.outside_allocator_default);
  EXPECT_EQ(r.memory.gpu.verdict_bytes(), r.memory.gpu.reserved + kDeepSpeedOutsideAllocatorDefaultBytes);
  ASSERT_TRUE(r.deepspeed_figures.has_value());
  EXPECT_TRUE(r.deepspeed_figures->outside_allocator_default);
  EXPECT_NE(r.deepspeed_figures->outside_allocator_note.find("zsim's default"), std::string::npos);
}

TEST(Report, AGivenOutsideFigureIsUsedAsGivenEvenZero) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  sc.cluster.efficiency.outside_allocator_bytes = 0;
  const Report r = make_report(sc, small_step(Tier::cpu));
  EXPECT_EQ(r.memory.gpu.outside_allocator, 0);
  EXPECT_FALSE(r.memory.gpu.outside_allocator_default);
  EXPECT_EQ(r.deepspeed_figures->outside_allocator_note.find("default"), std::string::npos);
}

TEST(Report, UnderDeepSpeedWithoutHostFiguresTheReportSaysTheHostIsNotPriced) {
  const Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  ASSERT_TRUE(r.deepspeed_figures.has_value());
  EXPECT_EQ(r.deepspeed_figures->host, "none");
  EXPECT_EQ(r.deepspeed_figures->host_note.rfind("not priced", 0), 0u);
  EXPECT_NE(r.deepspeed_figures->host_note.find("calibrate_node.py"), std::string::npos);
}

TEST(Report, UnderDeepSpeedZrunsHostIssueFiguresAreNamedAsNotDeepSpeedsPython) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  sc.cluster.efficiency.host_issue.kernel_us = 3;
  const Report r = make_report(sc, small_step(Tier::cpu));
  EXPECT_EQ(r.deepspeed_figures->host, "host_issue");
  EXPECT_NE(r.deepspeed_figures->host_note.find("not DeepSpeed's Python"), std::string::npos);
}

TEST(Report, WithDeepSpeedHostFiguresTheReportNamesTheStackTheyWereFittedUnder) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  sc.cluster.profile = "my-node";
  sc.cluster.efficiency.deepspeed_host.forward_fixed_us = 3000;
  sc.cluster.fitted_under = {"0.14.5", "2.11.0+cu130", "5.17.0", "3.12.3", "13.0", "NVIDIA H100 80GB HBM3", "2026-12-10"};
  const Report r = make_report(sc, small_step(Tier::cpu));
  EXPECT_EQ(r.deepspeed_figures->host, "deepspeed_host");
  EXPECT_EQ(r.deepspeed_figures->profile, "my-node");
  EXPECT_EQ(r.deepspeed_figures->fitted_under, sc.cluster.fitted_under);
  EXPECT_EQ(fitted_under_text(sc.cluster.fitted_under),
            "DeepSpeed 0.14.5, torch 2.11.0+cu130, transformers 5.17.0; python 3.12.3; CUDA 13.0; NVIDIA H100 80GB HBM3; "
            "2026-12-10");
}

TEST(Report, HostFiguresWithoutARecordedStackSayTheyHoldOnlyForTheirOwn) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  sc.cluster.efficiency.deepspeed_host.forward_fixed_us = 3000;
  const Report r = make_report(sc, small_step(Tier::cpu));
  EXPECT_NE(r.deepspeed_figures->host_note.find("does not record"), std::string::npos);
  EXPECT_EQ(fitted_under_text(sc.cluster.fitted_under), "");
}

TEST(Report, DataSheetGpuFiguresAreNamedAsSuchAndMeasuredOnesAsMeasured) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  EXPECT_EQ(make_report(sc, small_step(Tier::cpu)).deepspeed_figures->gpu, "data_sheet");
  sc.cluster.efficiency.hbm_by_kind.norm = 0.45;
  EXPECT_EQ(make_report(sc, small_step(Tier::cpu)).deepspeed_figures->gpu, "measured");
}

TEST(Report, UnderZrunThereAreNoDeepSpeedFigures) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::cpu);
  sc.runtime = RuntimeKind::zrun;
  EXPECT_FALSE(make_report(sc, small_step(Tier::cpu)).deepspeed_figures.has_value());
}
