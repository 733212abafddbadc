// Every bundled scenario, planned into a schedule, gives a consistent report (built only when the plan
// and scenario libraries are in the tree). Invariants only: the figures themselves are the plan's, and
// its oracle tests check them against the ZeRO papers.
#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/report/report.hpp"
#include "sim/report/report_json.hpp"
#include "sim/report/report_print.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "sim/schedule/schedule_json.hpp"

using namespace zsim;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> bundled() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator("scenarios"))
    if (e.is_regular_file() && e.path().extension() == ".yaml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

struct Planned {
  Scenario scenario;
  Schedule schedule;
  Report report;
};

Planned plan_and_report(const std::string& file) {
  Planned p{load_scenario(file), {}, {}};
  p.schedule = make_schedule(p.scenario, make_plan(p.scenario));
  p.report = make_report(p.scenario, p.schedule);
  return p;
}

}  // namespace

TEST(ReportScenarios, EachTiersPeakIsWhatIsLiveAfterItsPeakOpAndCategoriesAddUp) {
  for (const std::string& f : bundled()) {
    SCOPED_TRACE(f);
    const Planned p = plan_and_report(f);
    for (Tier t : {Tier::gpu, Tier::cpu, Tier::nvme}) {
      const TierMemory& m = p.report.memory.tier(t);
      EXPECT_EQ(m.at_peak.total(), m.peak) << to_string(t);
      Bytes details = 0;
      for (const auto& [name, bytes] : m.at_peak.buffer_detail) details += bytes;
      EXPECT_EQ(details, m.at_peak.buffers) << to_string(t);
      if (m.peak_op >= 0) EXPECT_EQ(live_after(p.schedule, m.peak_op, t), m.at_peak) << to_string(t);
    }
    EXPECT_GT(p.report.memory.gpu.peak, 0);
  }
}

TEST(ReportScenarios, CollectiveSummariesAddUpToThePhaseTotals) {
  for (const std::string& f : bundled()) {
    SCOPED_TRACE(f);
    const CommWalk& c = plan_and_report(f).report.comm;
    PhaseBytes sent, cross;
    for (const CollectiveSummary& k : c.collectives) {
      sent.at(k.phase) += k.bytes_per_gpu;
      cross.at(k.phase) += k.cross_node_bytes_per_gpu;
    }
    EXPECT_EQ(sent, c.per_gpu);
    EXPECT_EQ(cross, c.cross_node_per_gpu);
  }
}

TEST(ReportScenarios, ScheduleJsonRoundTripsIdentically) {
  for (const std::string& f : bundled()) {
    SCOPED_TRACE(f);
    const Planned p = plan_and_report(f);
    EXPECT_EQ(schedule_from_json_text(schedule_to_json_text(p.schedule), f), p.schedule);
  }
}

TEST(ReportScenarios, JsonAndTerminalReportsAreWritten) {
  for (const std::string& f : bundled()) {
    SCOPED_TRACE(f);
    const Planned p = plan_and_report(f);
    const nlohmann::json j = nlohmann::json::parse(report_json_text(p.report));
    EXPECT_EQ(j["memory"]["gpu"]["peak"], p.report.memory.gpu.peak);
    EXPECT_EQ(j["fits"], p.report.fits);
    const std::string text = format_report(p.report);
    EXPECT_NE(text.find(p.report.fits ? "FITS" : "DOES NOT FIT"), std::string::npos);
  }
}
