// ZRUN_FAULT: the specification's syntax, and which rank and op it hits.
#include "runtime/comm/fault_injection.hpp"

#include <gtest/gtest.h>

namespace zrun {
namespace {

TEST(FaultInjection, NoSpecificationInjectsNothing) {
  EXPECT_FALSE(parse_fault_spec("").has_value());
  EXPECT_FALSE(FaultInjector().should_fault(0, "fwd.L0.all_gather").has_value());
}

TEST(FaultInjection, ParsesRankOpAndKindInAnyOrder) {
  const auto s = parse_fault_spec("kind=hang,op=bwd.L3.reduce_scatter,rank=1");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 1);
  EXPECT_EQ(s->op, "bwd.L3.reduce_scatter");
  EXPECT_EQ(s->kind, FaultKind::hang);
}

TEST(FaultInjection, FiresOnlyForThatRankAndExactlyThatOp) {
  const FaultInjector f(parse_fault_spec("rank=1,op=fwd.L2.all_gather,kind=exit"));
  EXPECT_EQ(f.should_fault(1, "fwd.L2.all_gather"), FaultKind::exit);
  EXPECT_FALSE(f.should_fault(0, "fwd.L2.all_gather").has_value());
  EXPECT_FALSE(f.should_fault(1, "fwd.L2.all_gather.wait").has_value());
  EXPECT_FALSE(f.should_fault(1, "fwd.L1.all_gather").has_value());
}

TEST(FaultInjection, BadSpecificationsAreErrorsNamingTheVariableAndTheProblem) {
  const auto message = [](const char* text) {
    try {
      parse_fault_spec(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("rank=1,op=x").find("kind is missing"), std::string::npos);
  EXPECT_NE(message("rank=one,op=x,kind=exit").find("rank 'one' is not a rank number"), std::string::npos);
  EXPECT_NE(message("rank=1,op=x,kind=crash").find("kind 'crash' is not exit or hang"), std::string::npos);
  EXPECT_NE(message("rank=1,op=x,kind=exit,when=now").find("unknown key 'when'"), std::string::npos);
  EXPECT_NE(message("rank=1,op=x,kind=exit,rank=2").find("rank given twice"), std::string::npos);
  EXPECT_NE(message("rank=1;op=x").find("ZRUN_FAULT="), std::string::npos);
}

TEST(FaultInjection, AnInjectedExitEndsTheProcessWithItsCodeNamingRankAndOp) {
  EXPECT_EXIT(inject_fault(FaultKind::exit, 3, "step.optimizer"), ::testing::ExitedWithCode(kExitInjectedFault),
              "zrun: rank 3: injected fault: exit at op 'step.optimizer'");
}

}  // namespace
}  // namespace zrun
