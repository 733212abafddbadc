// The JSON `time` block and the terminal text of a TimingReport.
#include "sim/engine/timing_report_io.hpp"

#include <gtest/gtest.h>

namespace zsim {
namespace {

TimingReport sample() {
  TimingReport r;
  r.steps_simulated = 2;
  r.step_s = 2.0;
  r.compute_s = 1.5;
  r.exposed_comm_s = 0.5;
  r.exposed_comm_by_phase["backward"] = 0.5;
  r.exposed_comm_by_collective["reduce_scatter"] = 0.5;
  r.tflops_per_gpu = 123.5;
  r.tokens_per_s = 4096;
  r.critical_path = {{"backward compute.backward", 1.25, 3}};
  return r;
}

TEST(TimingJson, HoldsTheTimeBlockKeys) {
  const nlohmann::ordered_json j = timing_report_json(sample());
  EXPECT_EQ(j.at("step_s"), 2.0);
  EXPECT_EQ(j.at("compute_s"), 1.5);
  EXPECT_EQ(j.at("exposed_comm_s"), 0.5);
  EXPECT_EQ(j.at("exposed_comm_by_phase").at("backward"), 0.5);
  EXPECT_EQ(j.at("exposed_comm_by_collective").at("reduce_scatter"), 0.5);
  EXPECT_EQ(j.at("offload_s"), 0.0);
  EXPECT_EQ(j.at("optimizer_s"), 0.0);
  EXPECT_EQ(j.at("tflops_per_gpu"), 123.5);
  EXPECT_EQ(j.at("tokens_per_s"), 4096);
  EXPECT_EQ(j.at("critical_path").at(0).at("label"), "backward compute.backward");
  EXPECT_EQ(j.at("critical_path").at(0).at("ops"), 3);
}

TEST(TimingText, WarnsWhenAllocationsWentOverCapacity) {
  TimingReport r = sample();
  r.memory_waits = 3;
  r.memory_overcommits = 2;
  const std::string t = format_timing(r);
  EXPECT_NE(t.find("3 GPU allocations waited for memory to be freed; 2 went over HBM capacity"), std::string::npos)
      << t;
  EXPECT_EQ(timing_report_json(r).at("memory_overcommits"), 2);
}

TEST(TimingJson, ListsStepTimeFirst) { EXPECT_EQ(timing_report_json(sample()).begin().key(), "step_s"); }

TEST(TimingText, ShowsStepTimeShareOfExposedCommAndTheCriticalPath) {
  const std::string t = format_timing(sample());
  EXPECT_NE(t.find("2000.000 ms"), std::string::npos) << t;
  EXPECT_NE(t.find("steady state"), std::string::npos) << t;
  EXPECT_NE(t.find("exposed comm     500.000 ms   25.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("123.5 TFLOPS/GPU"), std::string::npos) << t;
  EXPECT_NE(t.find("backward compute.backward"), std::string::npos) << t;
  EXPECT_NE(t.find("timed peak memory  gpu 0.00 GiB"), std::string::npos) << t;
}

}  // namespace
}  // namespace zsim
