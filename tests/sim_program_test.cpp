// The engine's per-schedule program (SimProgram, sim/engine/simulate.hpp): ops of one work class cost the same
// (so pricing a class once is pricing each op), and one program times many clusters exactly as fresh runs do
// (a sweep group keeps one per schedule, sim/cli/sweep_groups.hpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/engine/op_work.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/topology/topology.hpp"
#include "tests/pipeline_test_util.hpp"

namespace zsim {
namespace {

using test::bundled_scenario_files;
using test::load_bundled;
using test::operator+;

TEST(SimProgram, OpsOfOneWorkClassCostWhatTheClasssFirstOpCostsOnEveryBundledScenario) {
  for (const std::string& file : bundled_scenario_files()) {
    SCOPED_TRACE(file);
    const Scenario s = load_bundled(file, test::small_overrides(3) + std::vector<std::string>{"training.grad_accum=3"});
    const Schedule schedule = make_schedule(s, make_plan(s), 2);
    const SimProgram program(schedule);
    const RankLinks links = rank_links(Topology(s.cluster));
    SimOptions o;
    o.precision = s.training.precision;
    ASSERT_EQ(program.work_class.size(), schedule.ops.size());
    EXPECT_LT(program.class_op.size(), schedule.ops.size() / 2);  // micro-steps and steps repeat their ops
    for (const Op& op : schedule.ops) {
      const int k = program.work_class[op.id];
      if (op.kind == OpKind::alloc || op.kind == OpKind::free) {
        EXPECT_EQ(k, 0);
        continue;
      }
      ASSERT_GT(k, 0) << op.name;
      const OpId first = program.class_op[k];
      ASSERT_LE(first, op.id);
      const OpWork a = op_work(op, schedule, s.cluster, links, o);
      const OpWork b = op_work(schedule.ops[first], schedule, s.cluster, links, o);
      EXPECT_EQ(a.fixed_s, b.fixed_s) << op.name << " vs " << schedule.ops[first].name;
      EXPECT_EQ(a.flow_bytes, b.flow_bytes) << op.name;
      EXPECT_EQ(a.algorithm, b.algorithm) << op.name;
      ASSERT_EQ(a.route.size(), b.route.size()) << op.name;
      for (size_t u = 0; u < a.route.size(); ++u) {
        EXPECT_EQ(a.route[u].link, b.route[u].link);
        EXPECT_EQ(a.route[u].coefficient, b.route[u].coefficient);
      }
    }
  }
}

TEST(SimProgram, OneProgramTimesEveryClusterExactlyAsAFreshRunDoes) {
  const Scenario base = load_bundled("llama2-70b-zeropp-ib100.yaml", {"model.layers=4", "training.grad_accum=3"});
  const Schedule schedule = make_schedule(base, make_plan(base), 2);
  const SimProgram program(schedule);
  for (const double ib_GBps : {6.25, 50.0, 400.0}) {
    SCOPED_TRACE(ib_GBps);
    ClusterSpec c = base.cluster;
    c.links.ib_GBps = ib_GBps;
    c.links.nvlink_GBps = 100 + ib_GBps;
    const TimingResult kept = simulate(c, program);
    const TimingResult fresh = simulate(c, schedule);
    ASSERT_EQ(kept.ops.size(), fresh.ops.size());
    for (size_t i = 0; i < fresh.ops.size(); ++i) {
      EXPECT_EQ(kept.ops[i].start_s, fresh.ops[i].start_s) << schedule.ops[i].name;
      EXPECT_EQ(kept.ops[i].end_s, fresh.ops[i].end_s) << schedule.ops[i].name;
    }
    EXPECT_EQ(kept.link_bytes, fresh.link_bytes);
    EXPECT_EQ(kept.stream_busy_s, fresh.stream_busy_s);
    EXPECT_EQ(kept.step_s(), fresh.step_s());
    EXPECT_EQ(kept.events, fresh.events);
  }
}

}  // namespace
}  // namespace zsim
