#include "runtime/comm/fault_injection.hpp"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace zrun {
namespace {

[[noreturn]] void bad(std::string_view text, const std::string& why) {
  throw std::invalid_argument(std::string(kEnvFault) + "='" + std::string(text) + "': " + why +
                              " (expected rank=N,op=NAME,kind=exit|hang)");
}

}  // namespace

std::optional<FaultSpec> parse_fault_spec(std::string_view text) {
  if (text.empty()) return std::nullopt;
  FaultSpec spec;
  bool has_rank = false, has_op = false, has_kind = false;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view part = text.substr(pos, comma - pos);
    pos = comma + 1;
    const std::size_t eq = part.find('=');
    if (eq == std::string_view::npos) bad(text, "'" + std::string(part) + "' is not KEY=VALUE");
    const std::string_view key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "rank") {
      if (has_rank) bad(text, "rank given twice");
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), spec.rank);
      if (value.empty() || ec != std::errc() || end != value.data() + value.size() || spec.rank < 0)
        bad(text, "rank '" + std::string(value) + "' is not a rank number");
      has_rank = true;
    } else if (key == "op") {
      if (has_op) bad(text, "op given twice");
      if (value.empty()) bad(text, "op is empty");
      spec.op = std::string(value);
      has_op = true;
    } else if (key == "kind") {
      if (has_kind) bad(text, "kind given twice");
      if (value == "exit") spec.kind = FaultKind::exit;
      else if (value == "hang") spec.kind = FaultKind::hang;
      else bad(text, "kind '" + std::string(value) + "' is not exit or hang");
      has_kind = true;
    } else {
      bad(text, "unknown key '" + std::string(key) + "'");
    }
  }
  if (!has_rank) bad(text, "rank is missing");
  if (!has_op) bad(text, "op is missing");
  if (!has_kind) bad(text, "kind is missing");
  return spec;
}

FaultInjector FaultInjector::from_env() {
  const char* v = std::getenv(kEnvFault);
  return FaultInjector(parse_fault_spec(v ? std::string_view(v) : std::string_view()));
}

std::optional<FaultKind> FaultInjector::should_fault(int rank, std::string_view op_name) const {
  if (!spec_ || spec_->rank != rank || spec_->op != op_name) return std::nullopt;
  return spec_->kind;
}

void inject_fault(FaultKind kind, int rank, std::string_view op_name) {
  const std::string op(op_name);
  if (kind == FaultKind::exit) {
    std::fprintf(stderr, "zrun: rank %d: injected fault: exit at op '%s'\n", rank, op.c_str());
    std::fflush(stderr);
    ::_exit(kExitInjectedFault);
  }
  std::fprintf(stderr, "zrun: rank %d: injected fault: hang at op '%s'\n", rank, op.c_str());
  std::fflush(stderr);
  while (true) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace zrun
