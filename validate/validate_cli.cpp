#include "validate/validate_cli.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>

#include "sim/common/atomic_file.hpp"
#include "sim/common/error.hpp"
#include "sim/engine/simulate.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/report/memory_walk.hpp"
#include "sim/report/report.hpp"
#include "sim/report/report_json.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "validate/deepspeed_run.hpp"
#include "validate/validation.hpp"

namespace zsim {

namespace {

nlohmann::json read_run_file(const std::string& file) {
  std::ifstream in(file);
  if (!in)
    throw InputError(SourceLocation{file, 0, 0, ""},
                     "cannot open the run (zrun's --json report or a DeepSpeed "
                     "harness result)");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(SourceLocation{file, 0, 0, ""}, std::string("invalid JSON: ") + e.what());
  }
}

// The scenario of a DeepSpeed run: --scenario, else the first candidate that exists (deepspeed_scenario_candidates).
std::string deepspeed_scenario(const ValidateRequest& r, const DeepSpeedRun& run) {
  namespace fs = std::filesystem;
  if (!r.scenario_file.empty()) {
    if (!fs::exists(r.scenario_file))
      throw InputError(SourceLocation{r.scenario_file, 0, 0, ""}, "--scenario: no such file");
    return r.scenario_file;
  }
  const std::string run_dir = fs::absolute(fs::path(run.source)).parent_path().string();
  const std::vector<std::string> candidates = deepspeed_scenario_candidates(run, run_dir, fs::current_path().string());
  for (const std::string& c : candidates)
    if (fs::is_regular_file(c)) {
      // Shown relative to the working directory where it lies below it (the committed record's paths).
      const fs::path rel = fs::path(c).lexically_relative(fs::current_path());
      return !rel.empty() && *rel.begin() != ".." ? rel.string() : c;
    }
  std::string tried;
  for (std::size_t i = 0; i < candidates.size() && i < 6; ++i) tried += "\n  " + candidates[i];
  if (candidates.size() > 6) tried += fmt::format("\n  ... ({} more)", candidates.size() - 6);
  throw InputError(SourceLocation{run.source, 0, 0, "case.dir"},
                   fmt::format("cannot find the scenario of case '{}' (case.dir '{}'); give it with --scenario FILE. "
                               "Tried:{}",
                               run.case_name, run.case_dir, tried));
}

// The ds_config.json beside the scenario against the one the run recorded (case.ds_config): a warning where they
// differ (the prediction is of the file).
void check_ds_config(const DeepSpeedRun& run, const std::string& scenario, std::ostream& err) {
  namespace fs = std::filesystem;
  if (run.ds_config.is_null()) return;
  const fs::path file = fs::path(scenario).parent_path() / run.ds_config_file;
  std::ifstream in(file);
  if (!in) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error&) {
    return;  // load_scenario says what is wrong with it
  }
  if (j != run.ds_config)
    err << "zsim validate: warning: " << file.string()
        << " differs from the ds_config the run recorded (case.ds_config "
        << "of " << run.source << "): zsim predicts the file\n";
}

struct DeepSpeedOutcome {
  DeepSpeedRun run;
  std::optional<DsValidation> validation;  // empty: the run failed
};

// Reads a DeepSpeed run, and where it is ok predicts its case with zsim and compares. Scenario warnings go to `err`.
DeepSpeedOutcome validate_deepspeed(const ValidateRequest& r, const nlohmann::json& j, const std::string& run_file,
                                    std::ostream& err) {
  DeepSpeedOutcome o{deepspeed_run_from_json(j, run_file), std::nullopt};
  if (!o.run.ok()) return o;
  const std::string scenario = deepspeed_scenario(r, o.run);
  check_ds_config(o.run, scenario, err);
  // The run's host speed (its reference loop), before the user's --set.
  const std::vector<std::string> host_speed = host_speed_overrides(o.run);
  LoadOptions load;
  load.overrides = host_speed;
  load.overrides.insert(load.overrides.end(), r.overrides.begin(), r.overrides.end());
  load.profile_dirs = r.profile_dirs;
  Scenario s = load_scenario(scenario, load);
  if (const int described = s.cluster.world_size(); described != o.run.world) {
    // The run's ranks (the harness runs one host: W GPUs, or W ranks sharing one GPU), before the user's --set.
    load.overrides = {"cluster.nodes=1", "cluster.gpus_per_node=" + std::to_string(o.run.world)};
    load.overrides.insert(load.overrides.end(), host_speed.begin(), host_speed.end());
    load.overrides.insert(load.overrides.end(), r.overrides.begin(), r.overrides.end());
    s = load_scenario(scenario, load);
    if (s.cluster.world_size() == o.run.world)
      err << "zsim validate: " << scenario << " describes " << described << " rank(s), the run had " << o.run.world
          << ": zsim predicts 1 node of " << o.run.world << " GPUs\n";
    else
      err << "zsim validate: warning: with the --set overrides zsim predicts " << s.cluster.world_size()
          << " rank(s) where the run had " << o.run.world << "\n";
  }
  for (const auto& w : s.warnings) err << w << "\n";
  DsPrediction p;
  p.scenario = scenario;
  const Schedule sch = make_schedule(s, make_plan(s), 2);  // zsim's report simulates 2 steps
  const Report report = make_report(s, sch);               // walk_memory(sch, capacity_of(s)) and the comm walk
  p.gpu_peak = report.memory.gpu.peak;
  p.gpu_reserved = predicted_reserved_from_report(report_to_json(report));
  p.step_s = simulate(s.cluster, sch).step_s();
  p.host_speed_scale = s.cluster.efficiency.deepspeed_host.host_speed_scale();
  p.autograd_host_speed_scale = s.cluster.efficiency.deepspeed_host.autograd_host_speed_scale();
  p.phases = phase_memory(sch);
  p.collectives = step_collectives(sch, 0);
  o.validation = compare_deepspeed_run(o.run, p);
  o.validation->stack_differences = stack_differences(s.cluster.fitted_under, o.run);
  if (!o.validation->stack_differences.empty()) {
    err << "zsim validate: warning: " << run_file << " ran under another stack than the one " << scenario
        << "'s figures were fitted under (cluster.fitted_under):";
    for (const std::string& d : o.validation->stack_differences) err << " " << d << ";";
    err << " DeepSpeed's host time and torch's kernels may differ there (docs/deepspeed-time.md, \"Predicting your "
           "own machine\")\n";
  }
  return o;
}

int run_validate_deepspeed(const ValidateRequest& r, const nlohmann::json& j, std::ostream& out, std::ostream& err) {
  if (!r.plots_dir.empty())
    throw InputError(SourceLocation{r.run_file, 0, 0, ""},
                     "--plots is for zrun runs (a DeepSpeed run has no per-op times)");
  const DeepSpeedOutcome o = validate_deepspeed(r, j, r.run_file, err);
  if (!o.validation) {
    err << format_deepspeed_failure(o.run);
    if (!r.json_file.empty()) write_file_atomically(r.json_file, deepspeed_failure_json(o.run).dump(1) + "\n");
    return kExitRunFailed;
  }
  out << "zsim against DeepSpeed: " << r.run_file << " (case " << o.run.case_name;
  if (!o.run.deepspeed_version.empty()) out << "; DeepSpeed " << o.run.deepspeed_version;
  if (!o.run.torch_version.empty()) out << ", torch " << o.run.torch_version;
  if (!o.run.transformers_version.empty()) out << ", transformers " << o.run.transformers_version;
  if (!o.run.gpu.empty()) out << " on " << o.run.gpu;
  out << ")\n" << format_deepspeed_validation(*o.validation);
  if (!r.json_file.empty()) write_file_atomically(r.json_file, deepspeed_validation_json(*o.validation).dump(1) + "\n");
  return 0;
}

// --deepspeed-summary DIR: every DeepSpeed run of DIR/runs/ (by name) into DIR/summary.md (and the bands).
int run_deepspeed_summary(const ValidateRequest& r, std::ostream& out, std::ostream& err) {
  namespace fs = std::filesystem;
  std::string dir = r.deepspeed_summary_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const fs::path runs = fs::path(dir) / "runs";
  if (!fs::is_directory(runs))
    throw InputError(SourceLocation{runs.string(), 0, 0, ""}, "--deepspeed-summary: no runs/ folder");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(runs))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<DsRecordEntry> entries;
  for (const fs::path& f : files) {
    const nlohmann::json j = read_run_file(f.string());
    if (!is_deepspeed_run(j)) {
      err << "zsim validate: " << f.string() << " is not a DeepSpeed run (format zsim.deepspeed_run): left out\n";
      continue;
    }
    std::ostringstream warnings;  // the scenarios' own warnings: the single-run validation prints them
    DeepSpeedOutcome o = validate_deepspeed(r, j, f.string(), warnings);
    const std::string name = f.stem().string();
    if (o.validation)
      out << fmt::format("{:<48} peak allocated {:+6.1f}%   collectives {}\n", name, 100 * o.validation->peak_rel_error,
                         o.validation->collectives_match ? "match" : "differ");
    else
      out << fmt::format("{:<48} failed ({}): {}\n", name, o.run.failure_kind, o.run.error);
    entries.push_back({name, std::move(o.run), std::move(o.validation)});
  }
  if (entries.empty()) throw InputError(SourceLocation{runs.string(), 0, 0, ""}, "no DeepSpeed runs in it");
  const std::string summary = (fs::path(dir) / "summary.md").string();
  write_file_atomically(summary, deepspeed_summary_markdown(entries, dir, kDeepSpeedBandMargin));
  out << "wrote " << summary << "\n";
  if (r.write_bands) {
    const std::string bands = (fs::path(dir) / kDeepSpeedBandsFile).string();
    write_file_atomically(bands, deepspeed_bands_json(entries, kDeepSpeedBandMargin).dump(1) + "\n");
    out << "wrote " << bands << "\n";
  }
  return 0;
}

}  // namespace

int run_validate(const ValidateRequest& r, std::ostream& out, std::ostream& err) {
  if (!r.deepspeed_summary_dir.empty()) {
    if (!r.run_file.empty() || !r.json_file.empty() || !r.plots_dir.empty() || !r.scenario_file.empty())
      throw InputError(SourceLocation{"zsim validate", 0, 0, ""},
                       "--deepspeed-summary DIR validates DIR/runs/: no RUN.json, --json, --plots or "
                       "--scenario with it");
    return run_deepspeed_summary(r, out, err);
  }
  if (r.write_bands)
    throw InputError(SourceLocation{"zsim validate", 0, 0, ""}, "--write-bands goes with --deepspeed-summary DIR");
  if (r.run_file.empty())
    throw InputError(SourceLocation{"zsim validate", 0, 0, ""}, "needs RUN.json (or --deepspeed-summary DIR)");
  const nlohmann::json run = read_run_file(r.run_file);
  if (is_deepspeed_run(run)) return run_validate_deepspeed(r, run, out, err);
  if (!r.scenario_file.empty())
    throw InputError(SourceLocation{r.run_file, 0, 0, ""},
                     "--scenario is for DeepSpeed runs (a zrun run names its own "
                     "scenario in measured.command)");
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
  c.usage =
      "zsim validate RUN.json [--set KEY=VALUE]... [--profile-dir DIR] [--json FILE] [--plots DIR] [--scenario FILE]"
      "   (RUN.json: zrun --json, or a validate/deepspeed harness result)\n"
      "  zsim validate --deepspeed-summary DIR [--write-bands]   (every DeepSpeed run of DIR/runs/ into "
      "DIR/summary.md)";
  c.add = [](CLI::App& app) -> std::pair<CLI::App*, SubcommandRun> {
    auto r = std::make_shared<ValidateRequest>();
    CLI::App* v = app.add_subcommand("validate",
                                     "compare a measured run (zrun's --json, or a DeepSpeed run of "
                                     "validate/deepspeed/harness.py) with zsim's prediction");
    v->add_option("run", r->run_file,
                  "zrun's --json report, or a DeepSpeed harness result (format zsim.deepspeed_run)");
    v->add_option("--scenario", r->scenario_file,
                  "a DeepSpeed run: the scenario to predict (default: the case's scenario.yaml, found from case.dir)");
    v->add_option("--deepspeed-summary", r->deepspeed_summary_dir,
                  "validate every DeepSpeed run of DIR/runs/ and write DIR/summary.md");
    v->add_flag("--write-bands", r->write_bands,
                "with --deepspeed-summary: also write DIR/deepspeed_bands.json (each run's peak error +-0.5 points)");
    v->add_option("--json", r->json_file,
                  "write the figures (step_time.rel_error, gpu_peak.rel_error, ...; a DeepSpeed run: "
                  "peak_allocated.rel_error, collectives, ...) to FILE");
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
