// The executor's cross-stream waits: enough to order every dep, and no more than needed.
#include "sim/schedule/stream_waits.hpp"

#include <gtest/gtest.h>

#include <deque>

#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "tests/pipeline_test_util.hpp"

namespace zsim {
namespace {

// A schedule of compute ops on the named streams, with the given deps.
Schedule program(const std::vector<std::pair<const char*, std::vector<OpId>>>& ops) {
  Schedule s;
  for (const auto& [stream, deps] : ops) {
    Op op;
    op.kind = OpKind::compute;
    op.stream = s.stream(stream);
    op.deps = deps;
    s.add(op);
  }
  return s;
}

TEST(StreamWaits, ADepOnAnotherStreamIsWaitedForAndRecordsAnEvent) {
  const Schedule s = program({{"compute", {}}, {"comm", {0}}});
  const StreamWaits w = stream_waits(s);
  EXPECT_EQ(w.waits[1], std::vector<OpId>{0});
  EXPECT_TRUE(w.records_event[0]);
  EXPECT_FALSE(w.records_event[1]);
}

TEST(StreamWaits, ADepOnTheSameStreamIsProgramOrderAndNeedsNoWait) {
  const Schedule s = program({{"compute", {}}, {"compute", {0}}});
  EXPECT_TRUE(stream_waits(s).waits[1].empty());
}

TEST(StreamWaits, AnEarlierOpOfAStreamAlreadyWaitedForIsNotWaitedForAgain) {
  // comm waits for compute op 1; a later comm op depending on compute op 0 is already ordered after it.
  const Schedule s = program({{"compute", {}}, {"compute", {}}, {"comm", {1}}, {"comm", {0}}});
  const StreamWaits w = stream_waits(s);
  EXPECT_EQ(w.waits[2], std::vector<OpId>{1});
  EXPECT_TRUE(w.waits[3].empty());
}

TEST(StreamWaits, OrderIsTransitiveThroughAThirdStream) {
  // rs waits for comm op 1, which waited for compute op 0: rs need not wait for op 0 itself.
  const Schedule s = program({{"compute", {}}, {"comm", {0}}, {"comm_rs", {0, 1}}});
  EXPECT_EQ(stream_waits(s).waits[2], std::vector<OpId>{1});
}

// Independent check: every dep is reachable through stream order and the waits alone.
bool ordered_by_waits(const Schedule& s, const StreamWaits& w, OpId from, OpId to) {
  std::vector<OpId> prev_on_stream(s.ops.size(), -1), last(s.streams.size(), -1);
  for (const Op& op : s.ops) {
    prev_on_stream[op.id] = last[op.stream];
    last[op.stream] = op.id;
  }
  std::vector<char> seen(s.ops.size(), 0);
  std::deque<OpId> todo{to};
  while (!todo.empty()) {
    const OpId x = todo.front();
    todo.pop_front();
    if (x == from) return true;
    if (x < from || seen[x]) continue;
    seen[x] = 1;
    if (prev_on_stream[x] >= 0) todo.push_back(prev_on_stream[x]);
    for (OpId d : w.waits[x]) todo.push_back(d);
  }
  return false;
}

TEST(StreamWaits, EveryDepOfEveryBundledScenarioIsOrderedByTheWaits) {
  for (const auto& file : test::bundled_scenario_files()) {
    const Scenario sc = test::load_bundled(file, test::small_overrides(2));
    const Schedule s = make_schedule(sc, make_plan(sc), 1);
    const StreamWaits w = stream_waits(s);
    std::size_t deps = 0;
    for (const Op& op : s.ops)
      for (OpId d : op.deps) {
        ++deps;
        EXPECT_TRUE(ordered_by_waits(s, w, d, op.id)) << file << ": op " << op.id << " dep " << d;
      }
    EXPECT_LE(w.total_waits(), deps) << file;
  }
}

}  // namespace
}  // namespace zsim
