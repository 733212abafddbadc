// Chrome trace JSON (Perfetto-loadable structure) and per-op CSV of a simulated schedule.
#include "sim/engine/trace_writer.hpp"

#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/engine/test_schedules.hpp"

namespace zsim {
namespace {

using testing::ScheduleBuilder;
using testing::test_cluster;

struct Fixture {
  ClusterSpec c = test_cluster(1, 8);
  Schedule s;
  TimingResult t;
  Fixture() {
    ScheduleBuilder b(c);
    const int world = b.group("world", 8, 8);
    OpId f = b.compute("fwd.L0", Phase::forward, 5e11);
    b.collective("bwd.L0.reduce_scatter, \"q\"", Phase::backward, CollectiveKind::reduce_scatter, world, kMiB, {f});
    s = b.s;
    t = simulate(c, s);
  }
};

TEST(ChromeTrace, HasOneCompleteEventPerOpOnItsStreamThreadInMicroseconds) {
  Fixture fx;
  std::ostringstream out;
  write_chrome_trace(out, fx.s, fx.t);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  int complete = 0;
  std::vector<std::string> threads;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") threads.push_back(e.at("args").at("name"));
    if (e.at("ph") != "X") continue;
    const OpId id = e.at("args").at("id");
    EXPECT_EQ(e.at("name"), fx.s.ops[id].name);
    EXPECT_EQ(e.at("tid"), fx.s.ops[id].stream);
    EXPECT_EQ(e.at("pid"), 0);
    EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), fx.t.ops[id].start_s * 1e6);
    EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), fx.t.ops[id].duration_s() * 1e6);
    ++complete;
  }
  EXPECT_EQ(complete, 2);
  EXPECT_EQ(threads, fx.s.streams);
  EXPECT_NE(j.at("otherData").at("note").get<std::string>().find("rank 0"), std::string::npos);
}

TEST(ChromeTrace, CarriesBytesAndFlopsInArgs) {
  Fixture fx;
  std::ostringstream out;
  write_chrome_trace(out, fx.s, fx.t);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    if (e.at("args").at("kind") == "compute") EXPECT_EQ(e.at("args").at("flops"), 5e11);
    if (e.at("args").at("kind") == "collective") {
      EXPECT_EQ(e.at("args").at("bytes"), kMiB);
      EXPECT_EQ(e.at("args").at("group"), "world");
    }
  }
}

TEST(OpCsv, HasAHeaderAndOneRowPerOpWithQuotedNames) {
  Fixture fx;
  std::ostringstream out;
  write_op_csv(out, fx.s, fx.t);
  std::istringstream in(out.str());
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "id,name,kind,phase,stream,start_s,end_s,bytes,flops");
  EXPECT_EQ(lines[1].rfind("0,fwd.L0,compute,forward,compute,0.000000000e+00,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("1,\"bwd.L0.reduce_scatter, \"\"q\"\"\",collective,backward,comm,", 0), 0u) << lines[2];
  EXPECT_NE(lines[2].find(",1048576,"), std::string::npos) << lines[2];
}

}  // namespace
}  // namespace zsim
