// zsim against zrun: errors are signed fractions of the measured value, per step and per op kind, and zrun's
// report is read with errors that name the missing key.
#include "validate/validation.hpp"

#include <gtest/gtest.h>

#include "sim/common/error.hpp"
#include "sim/engine/host_issue.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/report/memory_walk.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/scenario_parse.hpp"

namespace zsim {
namespace {

TEST(Validation, ErrorsAreSignedFractionsOfTheMeasuredValue) {
  EXPECT_DOUBLE_EQ(rel_error(1.2, 1.0), 0.2);
  EXPECT_DOUBLE_EQ(rel_error(0.5, 1.0), -0.5);
  const ErrorStats st = error_stats({0.1, -0.3, 0.05, 0.2, -0.01});
  EXPECT_EQ(st.count, 5);
  EXPECT_DOUBLE_EQ(st.median, 0.05);
  EXPECT_DOUBLE_EQ(st.worst, -0.3);
  EXPECT_DOUBLE_EQ(st.p90, 0.3);
}

// A "measured" run that took 25% longer than zsim predicts for every op and the step, with 25% more memory.
TEST(Validation, ARunSlowerByAQuarterIsPredictedTwentyPercentFastEverywhere) {
  const Scenario s = load_scenario(ZSIM_SOURCE_DIR "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                                   std::vector<std::string>{"runtime=zrun", "deepspeed.zero_optimization.stage=0", "cluster.gpus_per_node=2"});
  const Schedule sch = make_schedule(s, make_plan(s), 2);
  const TimingResult t = simulate(s.cluster, sch);
  MeasuredRun m;
  m.step_s = 1.25 * t.step_s();
  for (const Op& op : sch.ops)
    if (op.phase != Phase::init && t.ops[op.id].duration_s() > 0 && op.id < static_cast<OpId>(sch.ops.size() / 2))
      m.ops[op.id] = {1.25 * t.ops[op.id].start_s, 1.25 * t.ops[op.id].end_s};
  m.gpu_peak_bytes = 1000;
  const Validation v = validate_run(sch, t, 800, m);
  EXPECT_NEAR(v.step_rel_error, -0.2, 1e-9);
  EXPECT_NEAR(v.gpu_peak_rel_error, -0.2, 1e-12);
  ASSERT_FALSE(v.by_kind.empty());
  for (const auto& [kind, st] : v.by_kind) {
    EXPECT_NEAR(st.median, -0.2, 1e-9) << kind;
    EXPECT_NEAR(st.p90, 0.2, 1e-9) << kind;
  }
  EXPECT_TRUE(v.by_kind.count("forward"));
  EXPECT_TRUE(v.by_kind.count("all_reduce@world"));
  // The compute busy time (a union of intervals) and every collective size bin scale alike.
  EXPECT_GT(v.compute_predicted_s, 0);
  EXPECT_NEAR(v.compute_measured_s, 1.25 * v.compute_predicted_s, 1e-12);
  ASSERT_FALSE(v.collectives_by_size.empty());
  for (const CollectiveSizeBin& b : v.collectives_by_size) {
    EXPECT_NE(b.kind.find('@'), std::string::npos);
    EXPECT_NEAR(b.stats.median, -0.2, 1e-9) << b.kind << " from " << b.from;
    EXPECT_TRUE(b.to == 0 || b.to > b.from);
  }
}

// Collectives fall in size bins by their bytes: [0, 64 KiB), [64 KiB, 1 MiB), [1, 16 MiB), [16, 256 MiB), 256 MiB up,
// each kind and group apart.
TEST(Validation, CollectivesAreBinnedByKindAndSize) {
  const Scenario s = load_scenario(ZSIM_SOURCE_DIR "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                                   std::vector<std::string>{"runtime=zrun", "cluster.gpus_per_node=2"});
  const Schedule sch = make_schedule(s, make_plan(s), 2);
  const TimingResult t = simulate(s.cluster, sch);
  MeasuredRun m;
  m.step_s = t.step_s();
  std::map<std::pair<std::string, Bytes>, int> expected;  // (kind, bin start) -> count
  const Bytes edges[] = {0, 64LL << 10, 1LL << 20, 16LL << 20, 256LL << 20};
  for (const Op& op : sch.ops)
    if (op.kind == OpKind::collective && op.phase != Phase::init && t.ops[op.id].duration_s() > 0 &&
        op.id < static_cast<OpId>(sch.ops.size() / 2)) {
      m.ops[op.id] = {t.ops[op.id].start_s, t.ops[op.id].end_s};
      int b = 0;
      while (b + 1 < 5 && op.collective.bytes >= edges[b + 1]) ++b;
      ++expected[{std::string(to_string(op.collective.what)) + "@" + sch.groups[op.collective.group].name, edges[b]}];
    }
  ASSERT_FALSE(expected.empty());
  std::map<std::pair<std::string, Bytes>, int> got;
  for (const CollectiveSizeBin& b : validate_run(sch, t, 1, m).collectives_by_size) got[{b.kind, b.from}] = b.stats.count;
  EXPECT_EQ(got, expected);
}

// Each tier per rank: the GPU as walked; a node's CPU bytes over its GPUs; each category's own peak beside zrun's.
TEST(Validation, MemoryIsComparedPerRankByTierAndCategory) {
  const Scenario s = load_scenario(ZSIM_SOURCE_DIR "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                                   std::vector<std::string>{"runtime=zrun", "cluster.gpus_per_node=2",
                                                            "cluster.host.memory_bytes=549755813888",
                                                            "deepspeed.zero_optimization.offload_optimizer.device=cpu"});
  const Schedule sch = make_schedule(s, make_plan(s), 2);
  const MemoryWalk walk = walk_memory(sch, capacity_of(s));
  MeasuredRun m;
  m.tier_peaks["gpu"].peak = walk.gpu.peak;
  m.tier_peaks["cpu"].peak = walk.cpu.peak / 2 + 100;
  m.tier_peaks["cpu"].by_category["optimizer"] = 7;
  const std::vector<MemoryComparison> c = compare_memory(sch, walk, m);
  ASSERT_EQ(c.size(), 2u);  // no NVMe on either side
  EXPECT_EQ(c[0].tier, "gpu");
  EXPECT_EQ(c[0].predicted, walk.gpu.peak);
  EXPECT_EQ(c[1].tier, "cpu");
  EXPECT_EQ(c[1].predicted, walk.cpu.peak / 2);
  EXPECT_EQ(c[1].measured, walk.cpu.peak / 2 + 100);
  EXPECT_EQ(c[1].by_category.at("optimizer").first, category_peaks(sch, Tier::cpu).at(MemCategory::optimizer));
  EXPECT_EQ(c[1].by_category.at("optimizer").second, 7);
}

// zrun's op-timed step records a timing event after each op, which the GPU spends time on: a run whose every op
// took its predicted time plus that event's cost compares exactly once the cost is taken off; an op no longer than
// the event is left out.
TEST(Validation, EachOpsTimingEventCostIsTakenOffItsMeasuredTime) {
  const Scenario s = load_scenario(ZSIM_SOURCE_DIR "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                                   std::vector<std::string>{"runtime=zrun", "deepspeed.zero_optimization.stage=0", "cluster.gpus_per_node=2"});
  const Schedule sch = make_schedule(s, make_plan(s), 2);
  const TimingResult t = simulate(s.cluster, sch);
  const double event_s = 2e-6;
  MeasuredRun m;
  m.step_s = t.step_s();
  m.timing_event_s = event_s;
  int compared = 0;
  for (const Op& op : sch.ops)
    if (op.phase != Phase::init && t.ops[op.id].duration_s() > 0 && op.id < static_cast<OpId>(sch.ops.size() / 2)) {
      m.ops[op.id] = {t.ops[op.id].start_s, t.ops[op.id].end_s + event_s};
      compared += op.kind != OpKind::alloc && op.kind != OpKind::free;
    }
  OpId tiny = -1;
  for (const auto& [id, span] : m.ops)
    if (tiny < 0 && sch.ops[id].kind != OpKind::alloc && sch.ops[id].kind != OpKind::free) tiny = id;
  ASSERT_GE(tiny, 0);
  m.ops[tiny].second = m.ops[tiny].first + 0.5 * event_s;
  const Validation v = validate_run(sch, t, 1, m);
  EXPECT_EQ(v.unresolved_ops, 1);
  int counted = 0;
  for (const auto& [kind, st] : v.by_kind) {
    EXPECT_NEAR(st.median, 0, 1e-9) << kind;
    EXPECT_NEAR(st.worst, 0, 1e-9) << kind;
    counted += st.count;
  }
  EXPECT_EQ(counted, compared - 1);
  // Without the event's cost (reports before zrun measured it), each op reads as predicted faster.
  m.timing_event_s = 0;
  for (const auto& [kind, st] : validate_run(sch, t, 1, m).by_kind) EXPECT_LT(st.median, 0) << kind;
}

// The host model's time to issue a step is its first step's ops' host time: the schedule's two identical steps (init
// aside: the run's allocations, issued before any step) give twice the first step's; no host model, no time.
TEST(Validation, ThePredictedHostIssueTimeIsTheFirstStepsOpsAtTheProfilesPrices) {
  Scenario s = load_scenario(ZSIM_SOURCE_DIR "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                             std::vector<std::string>{"runtime=zrun", "cluster.gpus_per_node=2"});
  const Schedule sch = make_schedule(s, make_plan(s), 2);
  EXPECT_EQ(predicted_host_issue_s(sch, s.cluster), 0);
  s.cluster.efficiency.host_issue = {3, 7, 5, 4, 0.2};
  const double one = predicted_host_issue_s(sch, s.cluster);
  double all = 0;
  const std::vector<HostIssue> h = host_issue(sch, s.cluster);
  for (const Op& op : sch.ops)
    if (op.phase != Phase::init) all += h[op.id].total_s;
  EXPECT_GT(one, 0);
  EXPECT_NEAR(all, 2 * one, 1e-3 * all);
}

// zrun's per-op host times (named ops, allocations and frees included) against the host model's, summed per op kind
// over the ops of step 0: a run whose every op took the host 2 us longer than the model reads 2 us x ops longer.
TEST(Validation, HostIssuePerOpKindSumsTheModelsAndTheRunsTimesOfEachKindsOps) {
  Scenario s = load_scenario(ZSIM_SOURCE_DIR "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                             std::vector<std::string>{"runtime=zrun", "cluster.gpus_per_node=2"});
  s.cluster.efficiency.host_issue = {3, 7, 5, 4, 0.2};
  const Schedule sch = make_schedule(s, make_plan(s), 2);
  const TimingResult t = simulate(s.cluster, sch);
  const std::vector<HostIssue> h = host_issue(sch, s.cluster);
  MeasuredRun m;
  m.step_s = t.step_s();
  std::map<std::string, int> ops_of_kind;
  bool seen_step = false;
  for (const Op& op : sch.ops) {
    if (op.phase == Phase::init) continue;
    if (seen_step && op.phase != Phase::step) break;  // step 0 only, as zrun repeats it
    seen_step |= op.phase == Phase::step;
    m.op_issue.push_back({op.id + 1000, op.name, op.micro_step, h[op.id].total_s + 2e-6});  // the run's own ids
    ++ops_of_kind[op.kind == OpKind::alloc ? "alloc" : op.kind == OpKind::free ? "free" : "other"];
  }
  // One op timed on the GPU too, under the run's own id and its name: its row carries both host times.
  OpId fwd = 0;
  while (sch.ops[fwd].phase == Phase::init || sch.ops[fwd].kind != OpKind::compute) ++fwd;
  m.ops[fwd + 1000] = {t.ops[fwd].start_s, t.ops[fwd].end_s};
  m.op_names[fwd + 1000] = {sch.ops[fwd].name, sch.ops[fwd].micro_step};
  Validation v = validate_run(sch, t, 1, m);
  compare_host_issue(sch, s.cluster, v);
  const auto& by_kind = v.host_issue_by_kind;
  ASSERT_TRUE(by_kind.count("alloc"));
  ASSERT_TRUE(by_kind.count("free"));
  ASSERT_TRUE(by_kind.count("forward"));
  EXPECT_EQ(by_kind.at("alloc").ops, ops_of_kind["alloc"]);
  int ops = 0;
  for (const auto& [kind, k] : by_kind) {
    ops += k.ops;
    EXPECT_NEAR(k.measured_s - k.predicted_s, 2e-6 * k.ops, 1e-12) << kind;
  }
  EXPECT_EQ(ops, static_cast<int>(m.op_issue.size()));
  ASSERT_EQ(v.ops.size(), 1u);
  EXPECT_EQ(v.ops[0].id, fwd);
  EXPECT_DOUBLE_EQ(v.ops[0].predicted_issue_s, h[fwd].total_s);
  EXPECT_NEAR(v.ops[0].measured_issue_s, h[fwd].total_s + 2e-6, 1e-15);
  double predicted = 0;
  for (const auto& [kind, k] : by_kind) predicted += k.predicted_s;
  EXPECT_NEAR(predicted, predicted_host_issue_s(sch, s.cluster), 1e-12);
  // No host model in the profile: nothing to compare.
  s.cluster.efficiency.host_issue = {};
  compare_host_issue(sch, s.cluster, v);
  EXPECT_TRUE(v.host_issue_by_kind.empty());
}

TEST(Validation, ExposedCommunicationIsCommOutsideCompute) {
  // comm [0, 10) and [12, 14); compute [2, 5) and [4, 8) and [13, 20): exposed 0-2, 8-10, 12-13 = 5.
  EXPECT_DOUBLE_EQ(exposed_seconds({{0, 10}, {12, 14}}, {{2, 5}, {4, 8}, {13, 20}}), 5.0);
  EXPECT_DOUBLE_EQ(exposed_seconds({{0, 10}}, {}), 10.0);
  EXPECT_DOUBLE_EQ(exposed_seconds({{1, 2}}, {{0, 3}}), 0.0);
}

TEST(Validation, ARunSlowerByAQuarterHasAQuarterMoreExposedCommunication) {
  const Scenario s = load_scenario(ZSIM_SOURCE_DIR "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                                   std::vector<std::string>{"runtime=zrun", "deepspeed.zero_optimization.stage=0", "cluster.gpus_per_node=2"});
  const Schedule sch = make_schedule(s, make_plan(s), 2);
  const TimingResult t = simulate(s.cluster, sch);
  MeasuredRun m;
  m.step_s = 1.25 * t.step_s();
  for (const Op& op : sch.ops)
    if (op.phase != Phase::init && op.id < static_cast<OpId>(sch.ops.size() / 2))
      m.ops[op.id] = {1.25 * t.ops[op.id].start_s, 1.25 * t.ops[op.id].end_s};
  const Validation v = validate_run(sch, t, 1, m);
  ASSERT_FALSE(v.exposed_comm.empty());
  for (const auto& [phase, e] : v.exposed_comm) EXPECT_NEAR(e.measured_s, 1.25 * e.predicted_s, 1e-12) << phase;
  const auto j = validation_json(v);
  EXPECT_TRUE(j["exposed_comm"].begin()->contains("rel_error"));
}

// A run measured on a schedule whose ids differ from today's (ops were added since: 7 more before each of them
// here) compares each op with itself when the report names its ops, and an op today's schedule lacks is left out.
TEST(Validation, NamedOpsOfARunAreMatchedByNameWhenTheScheduleGainedOpsSince) {
  const Scenario s = load_scenario(ZSIM_SOURCE_DIR "/runtime/scenarios/tiny-zero3-1xh100.yaml",
                                   std::vector<std::string>{"runtime=zrun", "deepspeed.zero_optimization.stage=0", "cluster.gpus_per_node=2"});
  const Schedule sch = make_schedule(s, make_plan(s), 2);
  const TimingResult t = simulate(s.cluster, sch);
  MeasuredRun named, unnamed;
  named.step_s = unnamed.step_s = 1.25 * t.step_s();
  constexpr OpId kShift = 7;
  for (const Op& op : sch.ops)
    if (op.phase != Phase::init && t.ops[op.id].duration_s() > 0 && op.id < static_cast<OpId>(sch.ops.size() / 2)) {
      named.ops[op.id + kShift] = unnamed.ops[op.id + kShift] = {1.25 * t.ops[op.id].start_s, 1.25 * t.ops[op.id].end_s};
      named.op_names[op.id + kShift] = {op.name, op.micro_step};
      if (op.kind == OpKind::collective) named.collective_s[op.id + kShift] = 1.25 * t.ops[op.id].duration_s();
    }
  named.ops[1] = {0, 1};
  named.op_names[1] = {"fwd.gone", 0};
  const Validation v = validate_run(sch, t, 1, named);
  EXPECT_EQ(v.unmatched_ops, 1);
  ASSERT_TRUE(v.by_kind.count("forward"));
  ASSERT_TRUE(v.by_kind.count("all_reduce@world"));
  for (const auto& [kind, st] : v.by_kind) {
    EXPECT_NEAR(st.median, -0.2, 1e-9) << kind;
    EXPECT_NEAR(st.p90, 0.2, 1e-9) << kind;
  }
  // By id alone the same run compares ops with others: some op's error is not the -20% every op has.
  auto off = [](const Validation& x) {
    int n = 0;
    for (const OpComparison& c : x.ops)
      n += c.measured_s > 0 && std::abs(rel_error(c.predicted_s, c.measured_s) + 0.2) > 1e-6;
    return n;
  };
  EXPECT_EQ(off(v), 0);
  EXPECT_GT(off(validate_run(sch, t, 1, unnamed)), 0);
}

TEST(Validation, AReportWithoutAMeasuredBlockIsAnInputErrorNamingIt) {
  const nlohmann::json zsim_report = {{"format", "zsim.report"}, {"setup", {{"nodes", 1}, {"gpus_per_node", 1}}}};
  try {
    measured_run_from_json(zsim_report, "run.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("measured"), std::string::npos) << e.what();
  }
}

TEST(Validation, PerOpHostTimesAreReadWithTheirNamesAndANegativeOneNamesItsKey) {
  nlohmann::json run = {
      {"setup", {{"nodes", 1}, {"gpus_per_node", 1}}},
      {"measured",
       {{"command", {{"scenario", "s.yaml"}, {"overrides", nlohmann::json::array()}}},
        {"step_time_s", 0.01},
        {"ops", nlohmann::json::array()},
        {"collectives", nlohmann::json::array()},
        {"gpu_peak_bytes", 1},
        {"gpu_peak_bytes_by_category", nlohmann::json::object()},
        {"gpu_beyond_schedule_peak_bytes_by_category", nlohmann::json::object()},
        {"host_issue_ops", {{{"id", 7}, {"name", "fwd.L0.attn.q"}, {"micro_step", 1}, {"s", 5e-6}}}}}}};
  const MeasuredRun m = measured_run_from_json(run, "run.json");
  ASSERT_EQ(m.op_issue.size(), 1u);
  EXPECT_EQ(m.op_issue[0].id, 7);
  EXPECT_EQ(m.op_issue[0].name, "fwd.L0.attn.q");
  EXPECT_EQ(m.op_issue[0].micro_step, 1);
  EXPECT_DOUBLE_EQ(m.op_issue[0].s, 5e-6);
  run["measured"]["host_issue_ops"][0]["s"] = -1;
  try {
    measured_run_from_json(run, "run.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("measured.host_issue_ops[].s"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zsim
