#include "sim/cli/cli_app.hpp"

#include <ostream>

#include <CLI/CLI.hpp>

#include "sim/cli/atomic_file.hpp"
#include "sim/cli/pipeline.hpp"
#include "sim/common/error.hpp"
#include "sim/scenario/scenario_parse.hpp"

namespace zsim {
namespace {

constexpr int kExitNotInThisBuild = 1;

struct Arguments {
  std::string scenario;
  std::string json_file;
  std::string schedule_file;
  std::vector<std::string> overrides;
};

Scenario load(const Arguments& a, std::ostream& err) {
  Scenario s = load_scenario(a.scenario, a.overrides);
  for (const auto& w : s.warnings) err << w << "\n";
  return s;
}

int run_report(const Arguments& a, std::ostream& out, std::ostream& err) {
  Scenario s = load(a, err);
  ReportOutputs r = scenario_to_report(s);
  if (!a.json_file.empty()) write_file_atomically(a.json_file, r.json);
  out << r.terminal;
  return 0;
}

int run_plan(const Arguments& a, std::ostream& out, std::ostream& err) {
  Scenario s = load(a, err);
  auto schedule = scenario_to_schedule_json(s);
  if (!schedule) {
    err << "zsim plan: the scenario is valid, but this build has no schedule builder yet (sim/plan is not "
           "wired in); nothing written\n";
    return kExitNotInThisBuild;
  }
  write_file_atomically(a.schedule_file, *schedule);
  out << "schedule written to " << a.schedule_file << "\n";
  return 0;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  Arguments a;
  CLI::App app{"zsim: will this model train on this cluster under DeepSpeed ZeRO / ZeRO++, and how?\n"
               "  zsim SCENARIO.yaml [--json FILE] [--set KEY=VALUE]...\n"
               "  zsim plan SCENARIO.yaml --emit-schedule FILE [--set KEY=VALUE]...\n"
               "Scenario keys: docs/scenario.md",
               "zsim"};
  app.add_option("scenario", a.scenario, "scenario YAML file");
  app.add_option("--json", a.json_file, "also write the report as JSON to FILE");
  app.add_option("--set", a.overrides, "override a scenario key, e.g. deepspeed.zero_optimization.stage=2 "
                                       "(repeatable)")
      ->allow_extra_args(false)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI::App* plan = app.add_subcommand("plan", "build the plan and emit the schedule of one step as JSON");
  plan->add_option("scenario", a.scenario, "scenario YAML file")->required();
  plan->add_option("--emit-schedule", a.schedule_file, "write the schedule JSON to FILE")->required();
  plan->add_option("--set", a.overrides, "override a scenario key (repeatable)")
      ->allow_extra_args(false)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "zsim: " << e.what() << "\n" << "run 'zsim --help' for usage\n";
    return kExitBadInput;
  }
  try {
    if (plan->parsed()) return run_plan(a, out, err);
    if (a.scenario.empty()) {
      err << "zsim: no scenario given\nrun 'zsim --help' for usage\n";
      return kExitBadInput;
    }
    return run_report(a, out, err);
  } catch (const InputError& e) {
    err << e.what() << "\n";
    return kExitBadInput;
  }
}

}  // namespace zsim
