#include "sim/sweep/sweep.hpp"
#include "sim/sweep/sweep_csv.hpp"

#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "sim/common/error.hpp"
#include "sim/sweep/parallel_map.hpp"

using namespace zsim;

namespace {
// A fake pipeline: stage and bucket size decide memory and throughput; stage 0 does not fit.
SweepPoint fake_evaluate(const std::vector<std::string>& overrides) {
  SweepPoint p;
  int stage = -1;
  long bucket = 0;
  for (const auto& o : overrides) {
    const auto v = o.substr(o.find('=') + 1);
    if (o.rfind("stage=", 0) == 0) stage = std::stoi(v);
    if (o.rfind("bucket=", 0) == 0) bucket = std::stol(v);
  }
  if (stage == 9) throw InputError({"s.yaml", 3, 5, "stage"}, "stage must be 0-3");
  p.valid = true;
  p.fits = stage != 0;
  if (!p.fits) {
    p.overflow_tier = "gpu";
    p.rejection = "gpu over capacity by 12 GiB";
  }
  p.tokens_per_s = 1000.0 * stage + static_cast<double>(bucket);
  return p;
}
}  // namespace

TEST(Grid, ParsesKeyAndCommaSeparatedValues) {
  auto a = parse_grid_axis("deepspeed.zero_optimization.stage=1,2,3");
  EXPECT_EQ(a.key, "deepspeed.zero_optimization.stage");
  EXPECT_EQ(a.values, (std::vector<std::string>{"1", "2", "3"}));
}

TEST(Grid, RejectsTextWithoutEquals) { EXPECT_THROW(parse_grid_axis("stage"), InputError); }

TEST(Grid, RejectsEmptyValue) { EXPECT_THROW(parse_grid_axis("stage=1,,3"), InputError); }

TEST(Grid, ProductEnumeratesEveryCombinationOnceLastAxisFastest) {
  std::vector<GridAxis> axes{{"a", {"1", "2"}}, {"b", {"x", "y", "z"}}};
  ASSERT_EQ(grid_size(axes), 6u);
  EXPECT_EQ(grid_point(axes, 0), (std::vector<std::string>{"a=1", "b=x"}));
  EXPECT_EQ(grid_point(axes, 1), (std::vector<std::string>{"a=1", "b=y"}));
  EXPECT_EQ(grid_point(axes, 5), (std::vector<std::string>{"a=2", "b=z"}));
}

TEST(ParallelMap, ResultsAreIndependentOfThreadCount) {
  std::function<long(std::size_t)> f = [](std::size_t i) { return static_cast<long>(i * i); };
  EXPECT_EQ(parallel_map<long>(1000, 1, f), parallel_map<long>(1000, 4, f));
}

TEST(ParallelMap, ReportsEveryCompletion) {
  std::size_t calls = 0, last = 0;
  std::function<int(std::size_t)> f = [](std::size_t) { return 0; };
  parallel_map<int>(57, 3, f, [&](std::size_t done) { ++calls; last = done; });
  EXPECT_EQ(calls, 57u);
  EXPECT_EQ(last, 57u);
}

TEST(ParallelMap, PropagatesAnException) {
  std::function<int(std::size_t)> f = [](std::size_t i) -> int {
    if (i == 7) throw std::runtime_error("boom");
    return 0;
  };
  EXPECT_THROW(parallel_map<int>(20, 2, f), std::runtime_error);
}

TEST(Sweep, InvalidPointsAreRecordedNotFatal) {
  auto r = run_sweep({{"stage", {"3", "9"}}}, fake_evaluate, 2);
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_TRUE(r.points[0].valid);
  EXPECT_FALSE(r.points[1].valid);
  EXPECT_NE(r.points[1].invalid_reason.find("stage must be 0-3"), std::string::npos);
}

TEST(Sweep, AGrouperMakesEachGroupsPointsRunOneAfterAnotherAndChangesNoResult) {
  const std::vector<GridAxis> axes = {{"stage", {"1", "2", "9", "3"}}, {"bucket", {"5", "7", "8"}}};
  std::vector<std::string> order;  // the bucket of each point as evaluated (one thread)
  const auto recording = [&](const std::vector<std::string>& o) {
    order.push_back(o[1]);
    return fake_evaluate(o);
  };
  // Group by bucket; stage 9's grouper throws (evaluated on its own, still marked invalid by the evaluator).
  const SweepGrouper by_bucket = [](const std::vector<std::string>& o) -> std::size_t {
    if (o[0] == "stage=9") throw std::runtime_error("no group");
    return std::stoul(o[1].substr(o[1].find('=') + 1));
  };
  const SweepResult grouped = run_sweep(axes, recording, 1, {}, {}, by_bucket);
  const SweepResult plain = run_sweep(axes, fake_evaluate, 3);
  ASSERT_EQ(grouped.points.size(), plain.points.size());
  for (std::size_t i = 0; i < plain.points.size(); ++i) {
    EXPECT_EQ(grouped.points[i].index, i);
    EXPECT_EQ(grouped.points[i].overrides, plain.points[i].overrides);
    EXPECT_EQ(grouped.points[i].valid, plain.points[i].valid);
    EXPECT_EQ(grouped.points[i].tokens_per_s, plain.points[i].tokens_per_s);
  }
  // Groups in the order of their first point, grid order inside: bucket 5's three points, then 7's, then 8's;
  // a point without a group ranks by its own position (the stage-9 points, 6th to 8th in the grid).
  EXPECT_EQ(order, (std::vector<std::string>{"bucket=5", "bucket=5", "bucket=5", "bucket=7", "bucket=7", "bucket=7",
                                             "bucket=8", "bucket=8", "bucket=8", "bucket=5", "bucket=7",
                                             "bucket=8"}));
}

TEST(Sweep, RankingKeepsOnlyFittingPointsBestFirst) {
  auto r = run_sweep({{"stage", {"0", "1", "3", "2"}}, {"bucket", {"5", "7"}}}, fake_evaluate, 3);
  auto ranked = rank_fitting(r);
  ASSERT_EQ(ranked.size(), 6u);  // stage 0 (2 points) does not fit
  EXPECT_EQ(r.points[ranked[0]].overrides, (std::vector<std::string>{"stage=3", "bucket=7"}));
  for (std::size_t k = 1; k < ranked.size(); ++k)
    EXPECT_GE(r.points[ranked[k - 1]].tokens_per_s, r.points[ranked[k]].tokens_per_s);
}

TEST(Sweep, CsvHasHeaderAndOneRowPerPoint) {
  auto r = run_sweep({{"stage", {"0", "3"}}}, fake_evaluate, 1);
  std::ostringstream csv;
  write_sweep_csv(csv, r);
  std::string line;
  std::istringstream in(csv.str());
  std::getline(in, line);
  EXPECT_EQ(line.rfind("point,stage,valid,fits,overflow_tier,reason,step_s,tokens_per_s", 0), 0u);
  std::getline(in, line);
  EXPECT_EQ(line.rfind("0,0,1,0,gpu,gpu over capacity by 12 GiB,", 0), 0u);
  std::getline(in, line);
  EXPECT_EQ(line.rfind("1,3,1,1,,,", 0), 0u);
  EXPECT_FALSE(std::getline(in, line));
}

TEST(Sweep, SummaryNamesWhyOthersWereRejected) {
  auto r = run_sweep({{"stage", {"0", "3", "9"}}}, fake_evaluate, 2);
  std::ostringstream out;
  print_sweep_summary(out, r, 5);
  EXPECT_NE(out.str().find("3 configurations: 1 fit, 1 do not fit, 1 invalid"), std::string::npos);
  EXPECT_NE(out.str().find("1  does not fit: gpu memory overflows"), std::string::npos);
  EXPECT_NE(out.str().find("invalid: s.yaml:3:5"), std::string::npos);
}

namespace {
std::string csv_of(const SweepResult& r) {
  std::ostringstream out;
  write_sweep_csv(out, r);
  return out.str();
}
std::string summary_of(const SweepResult& r) {
  std::ostringstream out;
  print_sweep_summary(out, r, 100);
  return out.str();
}
SweepResult read_back(const std::string& csv, const std::string& name) {
  std::istringstream in(csv);
  return read_sweep_csv(in, name);
}
// Throughputs that differ only beyond 6 significant digits, an invalid point whose message holds a comma and
// quotes, and misfits: what a CSV round trip must keep exactly for the ranking to come out the same.
SweepPoint subtle_evaluate(const std::vector<std::string>& overrides) {
  SweepPoint p = fake_evaluate(overrides);
  p.tokens_per_s = 1e6 / 3.0 + p.tokens_per_s * 1e-9;
  p.step_s = 1.0 / (1.0 + p.tokens_per_s);
  if (overrides[1] == "bucket=8") throw InputError({"s.yaml", 4, 2, "bucket"}, "bucket \"8\", or any odd size");
  return p;
}
const std::vector<GridAxis> kAxes{{"stage", {"0", "1", "2", "3"}}, {"bucket", {"5", "7", "8"}}, {"x", {"a", "b"}}};
}  // namespace

TEST(SweepShard, ParsesKOfN) { EXPECT_EQ(parse_shard("3/16"), (SweepShard{3, 16})); }

TEST(SweepShard, RejectsKOutsideOneToN) {
  EXPECT_THROW(parse_shard("0/4"), InputError);
  EXPECT_THROW(parse_shard("5/4"), InputError);
  EXPECT_THROW(parse_shard("4"), InputError);
  EXPECT_THROW(parse_shard("a/4"), InputError);
}

TEST(SweepShard, TheShardsPartitionTheGridEachPointInExactlyOne) {
  const std::size_t points = 23;
  std::vector<int> seen(points, 0);
  for (std::size_t k = 1; k <= 5; ++k)
    for (std::size_t i : shard_indices(points, {k, 5})) seen.at(i)++;
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(points));
}

TEST(SweepShard, AShardEvaluatesOnlyItsPointsAndKeepsTheirGridIndex) {
  const auto r = run_sweep(kAxes, fake_evaluate, 2, {}, {2, 5});
  ASSERT_EQ(r.points.size(), 5u);  // 24 points: indices 1, 6, 11, 16, 21
  EXPECT_EQ(r.points[1].index, 6u);
  EXPECT_EQ(r.points[1].overrides, grid_point(kAxes, 6));
}

TEST(SweepCsv, ReadingBackWhatWasWrittenGivesTheSameCsv) {
  const auto r = run_sweep(kAxes, subtle_evaluate, 2);
  const std::string csv = csv_of(r);
  EXPECT_EQ(csv_of(read_back(csv, "all.csv")), csv);
}

TEST(SweepMerge, ShardsJoinedByMergeGiveTheUnshardedCsvAndRanking) {
  const auto whole = run_sweep(kAxes, subtle_evaluate, 2);
  for (std::size_t n : {1, 2, 3, 7, 30}) {
    SCOPED_TRACE(n);
    std::vector<SweepResult> parts;
    std::vector<std::string> names;
    for (std::size_t k = n; k >= 1; --k) {  // any order
      names.push_back("shard" + std::to_string(k) + ".csv");
      parts.push_back(read_back(csv_of(run_sweep(kAxes, subtle_evaluate, 1, {}, {k, n})), names.back()));
    }
    const auto merged = merge_sweeps(parts, names);
    EXPECT_EQ(csv_of(merged), csv_of(whole));
    EXPECT_EQ(rank_fitting(merged), rank_fitting(whole));
    EXPECT_EQ(summary_of(merged), summary_of(whole));
  }
}

TEST(SweepMerge, AMissingShardIsAnErrorNamingTheMissingPoint) {
  const std::vector<SweepResult> parts{run_sweep(kAxes, fake_evaluate, 1, {}, {1, 3}),
                                       run_sweep(kAxes, fake_evaluate, 1, {}, {3, 3})};
  try {
    merge_sweeps(parts, {"a.csv", "c.csv"});
    FAIL() << "merged with shard 2 of 3 missing";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("point 1 is in none of the files"), std::string::npos) << e.what();
  }
}

TEST(SweepMerge, APointInTwoFilesIsAnErrorNamingBoth) {
  const auto part = run_sweep(kAxes, fake_evaluate, 1, {}, {1, 2});
  try {
    merge_sweeps({part, part}, {"a.csv", "b.csv"});
    FAIL() << "merged a shard twice";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("b.csv: point 0 is also in a.csv"), std::string::npos) << e.what();
  }
}

TEST(SweepMerge, CsvsOfDifferentGridsAreRefused) {
  const auto a = run_sweep(kAxes, fake_evaluate, 1, {}, {1, 2});
  const auto b = run_sweep({{"stage", {"0", "1", "2", "3"}}, {"bucket", {"5", "7", "8"}}}, fake_evaluate, 1);
  EXPECT_THROW(merge_sweeps({a, b}, {"a.csv", "b.csv"}), InputError);
}

TEST(SweepCsv, ARowWithAMalformedNumberNamesFileLineAndColumn) {
  std::string csv = csv_of(run_sweep({{"stage", {"1", "2"}}}, fake_evaluate, 1));
  csv.replace(csv.rfind("2,1,1,"), 6, "2,1,x,");  // the second row's fits
  try {
    read_back(csv, "bad.csv");
    FAIL() << "read a malformed row";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:3:0: key 'fits'"), std::string::npos) << e.what();
  }
}
