#include "sim/cli/cli_app.hpp"

#include <algorithm>
#include <ostream>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "sim/common/atomic_file.hpp"
#include "sim/cli/advise_command.hpp"
#include "sim/cli/pipeline.hpp"
#include "sim/cli/runtime_comparison.hpp"
#include "sim/common/error.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "sim/scenario/yaml_document.hpp"
#include "sim/cli/sweep_groups.hpp"
#include "sim/sweep/progress_bar.hpp"
#include "sim/sweep/sweep.hpp"
#include "sim/sweep/sweep_csv.hpp"

namespace zsim {
namespace {

constexpr int kExitInternal = 1;

struct Arguments {
  std::string scenario;
  std::string json_file;
  std::string schedule_file;
  std::string trace_file;
  std::string csv_file;
  std::vector<std::string> overrides;
  std::vector<std::string> grid;
  std::string shard;                 // sweep --shard K/N
  std::vector<std::string> csv_in;   // sweep merge A.csv B.csv ...
  int steps = 2;
  int plan_steps = 1;
  unsigned threads = 0;  // 0 = all hardware threads
  bool both_runtimes = false;  // zsim SCENARIO --both-runtimes
  std::size_t top = 10;
};

Scenario load(const Arguments& a, std::ostream& err) {
  Scenario s = load_scenario(a.scenario, a.overrides);
  for (const auto& w : s.warnings) err << w << "\n";
  return s;
}

int run_report(const Arguments& a, std::ostream& out, std::ostream& err) {
  Scenario s = load(a, err);
  PipelineOptions o;
  o.steps = a.steps;
  o.want_trace = !a.trace_file.empty();
  o.want_csv = !a.csv_file.empty();
  ReportOutputs r = scenario_to_report(s, o);
  if (!a.json_file.empty()) write_file_atomically(a.json_file, r.json);
  if (o.want_trace) write_file_atomically(a.trace_file, r.trace);
  if (o.want_csv) write_file_atomically(a.csv_file, r.csv);
  out << r.terminal;
  if (a.both_runtimes) {
    PipelineOptions plain;
    plain.steps = a.steps;
    out << format_runtime_comparison(predict_under(s, RuntimeKind::deepspeed, plain),
                                     predict_under(s, RuntimeKind::zrun, plain));
  }
  return 0;
}

int run_plan(const Arguments& a, std::ostream& out, std::ostream& err) {
  Scenario s = load(a, err);
  write_file_atomically(a.schedule_file, scenario_to_schedule_json(s, a.plan_steps));
  out << "schedule written to " << a.schedule_file << "\n";
  return 0;
}

// A sweep's outputs, whether run or merged: its CSV (--csv) and the ranking on the terminal.
void report_sweep(const Arguments& a, const SweepResult& r, std::ostream& out) {
  if (!a.csv_file.empty()) {
    std::ostringstream csv;
    write_sweep_csv(csv, r);
    write_file_atomically(a.csv_file, csv.str());
  }
  print_sweep_summary(out, r, a.top);
}

int run_sweep_command(const Arguments& a, std::ostream& out, std::ostream& err) {
  // The file is read once; each point parses it with its overrides.
  const std::string text = read_input_file(a.scenario, "scenario file", {a.scenario, 0, 0, ""});
  const auto parse = [&](const std::vector<std::string>& overrides) {
    return parse_scenario(text, a.scenario, {overrides, {}});
  };
  for (const auto& w : parse(a.overrides).warnings) err << w << "\n";  // the base must be valid on its own
  std::vector<GridAxis> axes;
  for (const auto& g : a.grid) axes.push_back(parse_grid_axis(g));
  PipelineOptions o;
  o.steps = a.steps;
  const auto parse_point = [&](const std::vector<std::string>& point) {
    std::vector<std::string> overrides = a.overrides;
    overrides.insert(overrides.end(), point.begin(), point.end());
    return parse(overrides);
  };
  // Points that differ only in what the timing reads share one schedule (sweep_groups.hpp).
  SweepGroups groups(o);
  const SweepGrouper group = [&](const std::vector<std::string>& point) { return groups.add_point(parse_point(point)); };
  const SweepEvaluator evaluate = [&](const std::vector<std::string>& point) {
    return groups.evaluate(parse_point(point));
  };
  const unsigned threads = a.threads ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  const SweepShard shard = a.shard.empty() ? SweepShard{} : parse_shard(a.shard);
  ProgressBar bar;
  const SweepResult r =
      run_sweep(axes, evaluate, threads, [&](std::size_t d, std::size_t n) { bar.update(d, n); }, shard, group);
  const bool all_invalid = std::none_of(r.points.begin(), r.points.end(), [](auto& p) { return p.valid; });
  if (all_invalid && !r.points.empty()) {
    err << "zsim sweep: no point of the grid is a valid scenario; the first says:\n"
        << r.points.front().invalid_reason << "\n";
    return kExitBadInput;
  }
  report_sweep(a, r, out);
  return 0;
}

// `zsim sweep merge A.csv B.csv ...`: the shards' CSVs joined into the sweep's CSV and ranking.
int run_sweep_merge(int argc, const char* const* argv, std::ostream& out) {
  Arguments a;
  CLI::App app{"zsim sweep merge: join the CSVs of `zsim sweep --shard K/N` runs into one sweep's CSV and ranking\n"
               "  zsim sweep merge A.csv B.csv ... [--csv FILE] [--top N]",
               "zsim sweep merge"};
  app.add_option("csv_files", a.csv_in, "the shards' CSVs (any order)")->required()->expected(1, -1);
  app.add_option("--csv", a.csv_file, "write the merged CSV to FILE");
  app.add_option("--top", a.top, "how many of the best fitting configurations to list");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  }
  std::vector<SweepResult> parts;
  for (const auto& f : a.csv_in) {
    std::istringstream in(read_input_file(f, "sweep CSV", {f, 0, 0, ""}));
    parts.push_back(read_sweep_csv(in, f));
  }
  const SweepResult r = merge_sweeps(parts, a.csv_in);
  report_sweep(a, r, out);
  return 0;
}

void add_overrides(CLI::App* app, Arguments& a) {
  app->add_option("--set", a.overrides, "override a scenario key, e.g. deepspeed.zero_optimization.stage=2 "
                                         "(repeatable)")
      ->allow_extra_args(false)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
            const std::vector<Subcommand>& extra) {
  if (argc >= 3 && std::string(argv[1]) == "sweep" && std::string(argv[2]) == "merge") {
    try {
      return run_sweep_merge(argc - 2, argv + 2, out);
    } catch (const CLI::ParseError& e) {
      err << "zsim sweep merge: " << e.what() << "\n" << "run 'zsim sweep merge --help' for usage\n";
      return kExitBadInput;
    } catch (const InputError& e) {
      err << e.what() << "\n";
      return kExitBadInput;
    }
  }
  Arguments a;
  std::string usage = "zsim: will this model train on this cluster under DeepSpeed ZeRO / ZeRO++, and how?\n"
                      "  zsim SCENARIO.yaml [--json FILE] [--trace FILE] [--csv FILE] [--steps N] [--both-runtimes] [--set KEY=VALUE]...\n"
                      "  zsim plan SCENARIO.yaml --emit-schedule FILE [--set KEY=VALUE]...\n"
                      "  zsim sweep SCENARIO.yaml --grid KEY=V1,V2,... [--grid ...] [--csv FILE] [--shard K/N]\n"
                      "  zsim sweep merge A.csv B.csv ... [--csv FILE]   (joins --shard runs)\n"
                      "  zsim advise SCENARIO.yaml [--out ds_config.json] [--json FILE] [--top N]   (the configuration to use)\n";
  for (const Subcommand& x : extra) usage += "  " + x.usage + "\n";
  CLI::App app{usage + "Scenario keys: docs/scenario.md", "zsim"};
  app.add_option("scenario", a.scenario, "scenario YAML file");
  app.add_option("--json", a.json_file, "also write the report as JSON to FILE (docs/report-schema.md)");
  app.add_option("--trace", a.trace_file, "write a Chrome trace JSON (open in Perfetto) to FILE");
  app.add_option("--csv", a.csv_file, "write one CSV row per simulated op to FILE");
  app.add_option("--steps", a.steps, "optimizer steps to simulate (timing reports the steady state)")
      ->check(CLI::Range(1, 100));
  app.add_flag("--both-runtimes", a.both_runtimes,
               "also predict the scenario under DeepSpeed and under zrun, side by side (docs/deepspeed-time.md)");
  add_overrides(&app, a);
  CLI::App* plan = app.add_subcommand("plan", "build the plan and emit the schedule as JSON");
  plan->add_option("scenario", a.scenario, "scenario YAML file")->required();
  plan->add_option("--emit-schedule", a.schedule_file, "write the schedule JSON to FILE")->required();
  plan->add_option("--steps", a.plan_steps, "optimizer steps in the schedule")->check(CLI::Range(1, 100));
  add_overrides(plan, a);
  std::vector<std::pair<CLI::App*, SubcommandRun>> extras;
  for (const Subcommand& x : extra) extras.push_back(x.add(app));
  CLI::App* sweep = app.add_subcommand("sweep", "evaluate every combination of --grid values; rank what fits");
  sweep->add_option("scenario", a.scenario, "base scenario YAML file")->required();
  sweep->add_option("--grid", a.grid, "KEY=V1,V2,... (repeatable; the product is evaluated)")
      ->required()
      ->allow_extra_args(false)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sweep->add_option("--csv", a.csv_file, "write one CSV row per configuration to FILE");
  sweep->add_option("--threads", a.threads, "worker threads (default: all)");
  sweep->add_option("--top", a.top, "how many of the best fitting configurations to list");
  sweep->add_option("--shard", a.shard, "evaluate only the K-th of N slices of the grid (1 <= K <= N); join the "
                                       "CSVs with `zsim sweep merge`");
  sweep->add_option("--steps", a.steps, "optimizer steps simulated per point")->check(CLI::Range(1, 100));
  add_overrides(sweep, a);
  AdviseArguments advise_args;
  CLI::App* advise = app.add_subcommand("advise", "search the DeepSpeed configuration (ZeRO stage, batch split, "
                                                  "checkpointing, offload, ZeRO++, buckets); write the advice as a ds_config");
  advise->add_option("scenario", advise_args.scenario, "scenario YAML file (model, cluster, batch)")->required();
  advise->add_option("--out", advise_args.out_file, "write the advice as a DeepSpeed ds_config.json to FILE");
  advise->add_option("--json", advise_args.json_file, "write the answer as JSON to FILE");
  advise->add_option("--top", advise_args.top, "how many of the best configurations to list")->check(CLI::Range(1, 100));
  advise->add_option("--threads", advise_args.threads, "worker threads (default: all)");
  advise->add_option("--margin", advise_args.margin, "fraction of the GPU's memory to leave free")
      ->check(CLI::Range(0.0, 0.5));
  advise->add_option("--tie", advise_args.tie, "configurations within this fraction of the fastest's tokens/s are ties: "
                                              "advise the one changing the fewest of yours (0: the fastest)")
      ->check(CLI::Range(0.0, 0.5));
  add_overrides(advise, a);
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
    for (const auto& [sub, run] : extras)
      if (sub->parsed()) return run(out, err);
    if (sweep->parsed()) return run_sweep_command(a, out, err);
    if (advise->parsed()) {
      advise_args.overrides = a.overrides;
      return run_advise(advise_args, out, err);
    }
    if (a.scenario.empty()) {
      err << "zsim: no scenario given\nrun 'zsim --help' for usage\n";
      return kExitBadInput;
    }
    return run_report(a, out, err);
  } catch (const InputError& e) {
    err << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::invalid_argument& e) {  // the planner refused a combination the validator let by
    err << "zsim: " << a.scenario << ": " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    err << "zsim: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace zsim
