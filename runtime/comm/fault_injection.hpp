// Fault injection for testing that a zrun job ends cleanly: ZRUN_FAULT="rank=1,op=<op name>,kind=exit|hang"
// makes rank 1 exit (kind=exit) or block forever (kind=hang) when it reaches the op of that name. The
// executor asks should_fault(rank, op name) before each op; the watchdog and the launcher then end the job.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace zrun {

inline constexpr const char* kEnvFault = "ZRUN_FAULT";

enum class FaultKind { exit, hang };

struct FaultSpec {
  int rank = 0;
  std::string op;  // exact op name, e.g. "fwd.L3.all_gather" or "init.comm_check.world"
  FaultKind kind = FaultKind::exit;
};

// "" -> nullopt. Keys rank, op, kind, each once, all required, comma separated. Throws
// std::invalid_argument naming ZRUN_FAULT and the bad part.
std::optional<FaultSpec> parse_fault_spec(std::string_view text);

// What the executor queries before each op.
class FaultInjector {
 public:
  explicit FaultInjector(std::optional<FaultSpec> spec = std::nullopt) : spec_(std::move(spec)) {}
  static FaultInjector from_env();  // reads ZRUN_FAULT (throws like parse_fault_spec)

  std::optional<FaultKind> should_fault(int rank, std::string_view op_name) const;
  bool armed() const { return spec_.has_value(); }

 private:
  std::optional<FaultSpec> spec_;
};

// Carries the fault out: kind=exit prints "zrun: rank R: injected fault: exit at op 'OP'" and exits with
// kExitInjectedFault; kind=hang prints a line and blocks the calling thread forever.
[[noreturn]] void inject_fault(FaultKind kind, int rank, std::string_view op_name);

inline constexpr int kExitInjectedFault = 6;

}  // namespace zrun
