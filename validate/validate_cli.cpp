#include "validate/validate_cli.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>

#include "sim/common/atomic_file.hpp"
#include "sim/common/error.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/report/memory_walk.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "validate/validation.hpp"

namespace zsim {

int run_validate(const ValidateRequest& r, std::ostream& out, std::ostream& err) {
  std::ifstream in(r.run_file);
  if (!in) throw InputError(SourceLocation{r.run_file, 0, 0, ""}, "cannot open zrun's report");
  nlohmann::json run;
  try {
    run = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(SourceLocation{r.run_file, 0, 0, ""}, std::string("invalid JSON: ") + e.what());
  }
  const MeasuredRun m = measured_run_from_json(run, r.run_file);
  std::vector<std::string> overrides = m.overrides;
  overrides.push_back("cluster.nodes=" + std::to_string(m.nodes));
  overrides.push_back("cluster.gpus_per_node=" + std::to_string(m.gpus_per_node));
  overrides.insert(overrides.end(), r.overrides.begin(), r.overrides.end());
  overrides.push_back("runtime=zrun");  // the schedule zrun ran: its own layers and buffers
  LoadOptions load;
  load.overrides = overrides;
  load.profile_dirs = r.profile_dirs;
  const Scenario s = load_scenario(m.scenario, load);
  for (const auto& w : s.warnings) err << w << "\n";
  const Schedule sch = make_schedule(s, make_plan(s), 2);  // zrun repeats the first step's ops (same ids)
  if (auto w = attention_core_pricing_warning(s, sch)) err << "zsim validate: " << *w << "\n";
  const TimingResult t = simulate(s.cluster, sch);
  const MemoryWalk walk = walk_memory(sch, capacity_of(s));
  Validation v = validate_run(sch, t, walk.gpu.peak, m);
  v.memory = compare_memory(sch, walk, m);
  v.host_issue_predicted_s = predicted_host_issue_s(sch, s.cluster);
  compare_host_issue(sch, s.cluster, v);
  out << "zsim against zrun: " << r.run_file << " (" << m.scenario << " on " << m.nodes << " x " << m.gpus_per_node
      << " GPUs)\n"
      << format_validation(v);
  if (!r.json_file.empty()) write_file_atomically(r.json_file, validation_json(v).dump(1) + "\n");
  if (!r.plots_dir.empty()) {
    std::filesystem::create_directories(r.plots_dir);
    const std::string csv = r.plots_dir + "/ops.csv";
    write_file_atomically(csv, validation_ops_csv(v));
    // Debian's python3-matplotlib (scripts/install-deps.sh) belongs to /usr/bin/python3.
    const std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    const std::string cmd = python + " " ZSIM_SOURCE_DIR "/validate/plots.py '" + csv + "' '" + r.plots_dir + "'";
    if (std::system(cmd.c_str()) != 0) {
      err << "zsim validate: the plots failed (python3 with matplotlib: " << cmd << ")\n";
      return 1;
    }
    out << "plots written to " << r.plots_dir << "\n";
  }
  return 0;
}

Subcommand validate_subcommand() {
  Subcommand c;
  c.usage = "zsim validate RUN.json [--set KEY=VALUE]... [--profile-dir DIR] [--json FILE] [--plots DIR]   (RUN.json: zrun --json)";
  c.add = [](CLI::App& app) -> std::pair<CLI::App*, SubcommandRun> {
    auto r = std::make_shared<ValidateRequest>();
    CLI::App* v = app.add_subcommand("validate", "compare zrun's measured run (its --json) with zsim's prediction");
    v->add_option("run", r->run_file, "zrun's --json report")->required();
    v->add_option("--json", r->json_file, "write the figures (step_time.rel_error, gpu_peak.rel_error, ...) to FILE");
    v->add_option("--plots", r->plots_dir, "write PNG plots (matplotlib) into DIR");
    v->add_option("--profile-dir", r->profile_dirs,
                  "also search DIR for cluster.profile (e.g. zrun calibrate's profile; repeatable)")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    v->add_option("--set", r->overrides, "override a scenario key, e.g. deepspeed.zero_optimization.stage=2 "
                                         "(repeatable)")
        ->allow_extra_args(false)
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    return {v, [r](std::ostream& out, std::ostream& err) { return run_validate(*r, out, err); }};
  };
  return c;
}

}  // namespace zsim
