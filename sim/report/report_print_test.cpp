// Specification of the terminal report: human units, aligned tables, the verdict.
#include "sim/report/report_print.hpp"

#include <sstream>

#include <gtest/gtest.h>

#include "sim/report/human_units.hpp"
#include "sim/report/report_test_fixture.hpp"

using namespace zsim;
using namespace zsim::testing;
using S = SmallStep;

namespace {

std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) return line;
  ADD_FAILURE() << "no line starting with '" << prefix << "' in:\n" << text;
  return "";
}

std::string fitting() {
  return format_report(make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu)));
}
std::string misfit() {
  Scenario sc = small_scenario(S::kGpuPeak - kMiB, OffloadDevice::nvme);
  sc.runtime = RuntimeKind::zrun;  // the GPU verdict on the peak
  return format_report(make_report(sc, small_step(Tier::nvme)));
}

}  // namespace

TEST(ReportPrint, MemoryTableShowsPeakAndCapacityPerTierInHumanUnits) {
  const std::string t = fitting();
  const std::string peak = line_starting(t, "  peak ");
  EXPECT_NE(peak.find(human_bytes(S::kGpuPeak)), std::string::npos) << peak;
  EXPECT_NE(peak.find(human_bytes(S::kGpn * S::kOptShard)), std::string::npos) << peak;
  EXPECT_NE(line_starting(t, "  capacity").find("80.0 GiB"), std::string::npos);
}

TEST(ReportPrint, MemoryRowsAreAligned) {
  const std::string t = fitting();
  const size_t width = line_starting(t, "  Memory at peak").size();
  for (const char* label : {"  params", "  grads", "  optimizer", "  activations", "  buffers", "    gathered",
                            "    bucket", "  peak ", "  capacity", "  headroom", "  fits"})
    EXPECT_EQ(line_starting(t, label).size(), width) << label;
}

TEST(ReportPrint, ShowsBufferDetailRows) {
  EXPECT_NE(line_starting(fitting(), "    bucket").find(human_bytes(S::kLayer)), std::string::npos);
}

TEST(ReportPrint, CommTableShowsPerPhaseTotalsAndCrossNodePerNode) {
  const std::string t = fitting();
  const Bytes M = 2 * S::kLayer;
  EXPECT_NE(line_starting(t, "  total").find(human_bytes(3 * M * (S::kN - 1) / S::kN)), std::string::npos);
  EXPECT_NE(line_starting(t, "  cross-node per node").find(human_bytes(3 * M / 2)), std::string::npos);
}

TEST(ReportPrint, ListsEachCollectiveWithCount) {
  const std::string line = line_starting(fitting(), "  backward  reduce_scatter");
  EXPECT_NE(line.find("world"), std::string::npos) << line;
  EXPECT_NE(line.find(" 2 "), std::string::npos) << line;  // two layers
}

TEST(ReportPrint, FittingReportSaysFitsWithHeadroom) {
  const Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  const std::string v = line_starting(format_report(r), "FITS");
  // Under DeepSpeed the headroom is taken on reserved + outside the allocator (here zsim's default).
  EXPECT_EQ(r.memory.gpu.headroom(), 80 * kGiB - r.memory.gpu.reserved - kDeepSpeedOutsideAllocatorDefaultBytes);
  EXPECT_NE(v.find("headroom " + human_bytes(r.memory.gpu.headroom())), std::string::npos) << v;
}

TEST(ReportPrint, MisfitNamesTheOverflowingTierAmountAndFirstOp) {
  const std::string v = line_starting(misfit(), "DOES NOT FIT");
  EXPECT_NE(v.find("GPU needs " + human_bytes(S::kGpuPeak)), std::string::npos) << v;
  EXPECT_NE(v.find("over by 1.00 MiB"), std::string::npos) << v;
  EXPECT_NE(v.find("first overflow: GPU at op #"), std::string::npos) << v;
}

TEST(ReportPrint, CopiesTableAppearsOnlyWhenThereAreCopies) {
  EXPECT_NE(line_starting(misfit(), "  Copies per GPU per step").find("nvme_read"), std::string::npos);
  Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  r.comm.h2d = r.comm.d2h = PhaseBytes{};
  EXPECT_EQ(format_report(r).find("Copies"), std::string::npos);
}

TEST(ReportPrint, HeaderNamesModelClusterAndZeroAndCanBeLeftOut) {
  const Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  const std::string with = format_report(r);
  EXPECT_NE(line_starting(with, "  model").find("tiny, 8.39M parameters"), std::string::npos);
  EXPECT_NE(line_starting(with, "  cluster").find("2 nodes x 4 h100-80gb = 8 GPUs"), std::string::npos);
  EXPECT_NE(line_starting(with, "  ZeRO").find("stage 3 + offload_optimizer=cpu"), std::string::npos);
  const std::string without = format_report(r, {.header = false});
  EXPECT_EQ(without.find("tiny"), std::string::npos);
  EXPECT_EQ(without.rfind("  Memory at peak", 0), 0u);
}

TEST(ReportPrint, ListsWarnings) {
  EXPECT_NE(fitting().find("  - deepspeed.zero_optimization.round_robin_gradients"), std::string::npos);
}

TEST(ReportPrint, ScenarioWarningsCanBeLeftToTheCallerWhileTheReportsOwnStay) {
  Scenario sc = small_scenario(80 * kGiB, OffloadDevice::nvme);
  sc.cluster.nvme.bytes = 0;
  const Report r = make_report(sc, small_step(Tier::nvme));
  const std::string t = format_report(r, {.scenario_warnings = false});
  EXPECT_EQ(t.find("round_robin_gradients"), std::string::npos);
  EXPECT_NE(t.find("  - the schedule places"), std::string::npos);
  EXPECT_EQ(format_report(make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu)),
                          {.scenario_warnings = false})
                .find("Warnings:"),
            std::string::npos);
}

TEST(ReportPrint, AttachedTimeTextComesBeforeTheVerdict) {
  Report r = make_report(small_scenario(80 * kGiB, OffloadDevice::cpu), small_step(Tier::cpu));
  r.time = ReportTime{nlohmann::ordered_json::object(), "Time per step: 1.25 s\n"};
  const std::string t = format_report(r);
  ASSERT_NE(t.find("Time per step: 1.25 s"), std::string::npos);
  EXPECT_LT(t.find("Time per step"), t.find("FITS"));
}

// Issue 59: the figures a DeepSpeed prediction used are said, and a default outside the allocator is marked.
TEST(ReportPrint, UnderDeepSpeedTheVerdictMarksADefaultOutsideTheAllocator) {
  EXPECT_NE(line_starting(fitting(), "FITS").find("outside the allocator 1.69 GiB (default) ="), std::string::npos);
}

TEST(ReportPrint, UnderDeepSpeedABlockSaysWhichFiguresPricedItBeforeTheVerdict) {
  const std::string t = fitting();
  EXPECT_LT(t.find("DeepSpeed's figures (runtime deepspeed)"), t.find("FITS"));
  EXPECT_NE(line_starting(t, "  host ").find("not priced"), std::string::npos);
  EXPECT_NE(line_starting(t, "  fitted under").find("not recorded"), std::string::npos);
  EXPECT_NE(line_starting(t, "  GPU ").find("the data sheet's"), std::string::npos);
}

TEST(ReportPrint, UnderZrunThereIsNoDeepSpeedFiguresBlock) {
  EXPECT_EQ(misfit().find("DeepSpeed's figures"), std::string::npos);
}
