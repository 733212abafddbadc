// time_schedule: the CLI's one call renders the report, and the trace / CSV only when asked.
#include "sim/engine/time_schedule.hpp"

#include <gtest/gtest.h>

#include "sim/engine/test_schedules.hpp"

namespace zsim {
namespace {

Scenario scenario_with(const ClusterSpec& c, Precision p) {
  Scenario s;
  s.cluster = c;
  s.training.precision = p;
  return s;
}

TEST(TimeSchedule, RendersTheReportAndOnlyTheRequestedFiles) {
  const ClusterSpec c = testing::test_cluster(1, 8);
  testing::ScheduleBuilder b(c);
  b.compute("fwd", Phase::forward, 5e14);
  const TimeOutputs none = time_schedule(scenario_with(c, Precision::bf16), b.s);
  EXPECT_DOUBLE_EQ(none.report.step_s, 1.0);
  EXPECT_EQ(none.json.at("step_s"), 1.0);
  EXPECT_NE(none.terminal.find("1000.000 ms"), std::string::npos);
  EXPECT_TRUE(none.trace_json.empty());
  EXPECT_TRUE(none.csv.empty());
  const TimeOutputs both = time_schedule(scenario_with(c, Precision::bf16), b.s, {SharePolicy::fair, true, true});
  EXPECT_NE(both.trace_json.find("\"traceEvents\""), std::string::npos);
  EXPECT_EQ(both.csv.rfind("id,name,kind,phase,stream,start_s,end_s,bytes,flops\n", 0), 0u);
}

TEST(TimeSchedule, Fp32TrainingRunsAtTheFp32Peak) {
  const ClusterSpec c = testing::test_cluster(1, 8);  // 1000 bf16 / 60 fp32 TFLOPS, efficiency 0.5
  testing::ScheduleBuilder b(c);
  b.compute("fwd", Phase::forward, 3e13);
  EXPECT_DOUBLE_EQ(time_schedule(scenario_with(c, Precision::fp32), b.s).report.step_s, 3e13 / (60e12 * 0.5));
}

}  // namespace
}  // namespace zsim
