// zsim_bench: times the real zsim code paths and prints each figure with its ratio to the issue-3 target.
//   zsim_bench pipeline SCENARIO [--steps N] [--repeat R] [--target-s S] [--target-gib G] [--unrolled 1]
//       scenario -> plan -> schedule -> report -> timing (targets: default 1 s, 1 GiB); with grad_accum >= 16
//       the repeated micro-steps are priced once (sim/cli/repeated_micro_steps.hpp) unless --unrolled 1
//   zsim_bench sweep SCENARIO --grid K=V,... [--grid ...] [--threads T] [--target-s S]
//       `zsim sweep`, in process (target: default 60 s)
// Peak memory is this process's RSS high-water mark (getrusage), so run one mode per process (bench/run.sh).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "sim/cli/allocator_tuning.hpp"
#include "sim/cli/cli_app.hpp"
#include "sim/cli/pipeline.hpp"
#include "sim/cli/repeated_micro_steps.hpp"
#include "sim/engine/time_schedule.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/schedule_builder.hpp"
#include "sim/report/report.hpp"
#include "sim/scenario/scenario_parse.hpp"
#include "sim/sweep/grid.hpp"

using namespace zsim;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // Linux reports KiB
}

// User + system CPU seconds of this process so far (all threads): on a shared machine, where wall time
// depends on the other load, this is the figure to compare between builds.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

void print_ratio(const char* what, double measured, double target, const char* unit) {
  const double ratio = measured / target;
  std::printf("  %-28s %12.3f %-4s target <= %-8g ratio = measured/target = %.3f  %s\n", what, measured, unit,
              target, ratio, ratio <= 1.0 ? "PASS" : "FAIL");
}

// Returns the value following `flag` in argv (or `fallback`), and every value of a repeated `flag`.
std::vector<std::string> values_of(int argc, char** argv, const std::string& flag) {
  std::vector<std::string> v;
  for (int i = 2; i + 1 < argc; ++i)
    if (argv[i] == flag) v.emplace_back(argv[++i]);
  return v;
}
int int_option(int argc, char** argv, const std::string& flag, int fallback) {
  const auto v = values_of(argc, argv, flag);
  return v.empty() ? fallback : std::atoi(v.back().c_str());
}
double double_option(int argc, char** argv, const std::string& flag, double fallback) {
  const auto v = values_of(argc, argv, flag);
  return v.empty() ? fallback : std::atof(v.back().c_str());
}

// The targets a run is judged against (--target-s, --target-gib); defaults are issue 3's.
struct Targets {
  double wall_s = 1.0;
  double rss_gib = 1.0;
};

int bench_pipeline(const std::string& path, int steps, int repeat, const Targets& target, bool unrolled) {
  PipelineOptions options;
  options.steps = steps;
  if (unrolled) options.repeat_from_micro_steps = 0;  // every micro-step built and simulated (for comparison)
  // The measured run: exactly what `zsim SCENARIO --json FILE --steps N` computes (minus writing files).
  double best_s = 1e300;
  std::size_t json_bytes = 0;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    const Scenario scenario = load_scenario(path, std::vector<std::string>{});
    const ReportOutputs out = scenario_to_report(scenario, options);
    best_s = std::min(best_s, seconds_since(t0));
    json_bytes = out.json.size();
  }
  const double rss = peak_rss_bytes();

  // A second, staged run of the same stages (for the breakdown and the op/event counts).
  auto t = Clock::now();
  const Scenario scenario = load_scenario(path, std::vector<std::string>{});
  const double load_s = seconds_since(t);
  if (!unrolled && options.repeat_from_micro_steps > 0 &&
      scenario.training.grad_accum >= options.repeat_from_micro_steps) {
    // Issue 12's path: a few truncated programs walked and simulated, the figures extended to grad_accum.
    RepeatOptions ro;
    ro.steps = steps;
    t = Clock::now();
    const auto fast = report_by_repeated_micro_steps(scenario, ro);
    const double fast_s = seconds_since(t);
    std::printf("zsim_bench pipeline: %s, %d step(s), best of %d run(s)\n", path.c_str(), steps, repeat);
    if (fast)
      std::printf("  repeated micro-steps priced once: %d of %d micro-steps per step built at most, %zu ops simulated "
                  "in all probes (%.4f s), report JSON %zu bytes\n  predicted step %.4f s, %.1f TFLOPS/GPU, fits: %s\n",
                  fast->built_micro_steps, scenario.training.grad_accum, fast->ops_simulated, fast_s, json_bytes,
                  fast->time.step_s, fast->time.tflops_per_gpu, fast->report.fits ? "yes" : "no");
    else
      std::printf("  repeated micro-steps: figures not periodic, the whole program was run (%.4f s)\n", fast_s);
    print_ratio("wall time", best_s, target.wall_s, "s");
    print_ratio("peak RSS", rss / (1024.0 * 1024.0 * 1024.0), target.rss_gib, "GiB");
    return 0;
  }
  t = Clock::now();
  const Plan plan = make_plan(scenario);
  const double plan_s = seconds_since(t);
  t = Clock::now();
  const Schedule schedule = make_schedule(scenario, plan, steps);
  const double schedule_s = seconds_since(t);
  t = Clock::now();
  const Report report = make_report(scenario, schedule);
  const double report_s = seconds_since(t);
  t = Clock::now();
  const TimeOutputs time = time_schedule(scenario, schedule, {});
  const double time_s = seconds_since(t);
  const double ops = static_cast<double>(schedule.ops.size());

  std::printf("zsim_bench pipeline: %s, %d step(s), best of %d run(s)\n", path.c_str(), steps, repeat);
  std::printf("  cluster %d nodes x %d GPUs, %zu ops in the schedule, %lld engine events, report JSON %zu bytes\n",
              scenario.cluster.nodes, scenario.cluster.gpus_per_node, schedule.ops.size(),
              static_cast<long long>(time.result.events), json_bytes);
  std::printf("  predicted step %.4f s, %.1f TFLOPS/GPU, fits: %s\n", time.report.step_s,
              time.report.tflops_per_gpu, report.fits ? "yes" : "no");
  std::printf("  stages (staged run): load %.4f s, plan %.4f s, schedule %.4f s, report %.4f s, timing %.4f s\n",
              load_s, plan_s, schedule_s, report_s, time_s);
  print_ratio("wall time", best_s, target.wall_s, "s");
  print_ratio("peak RSS", rss / (1024.0 * 1024.0 * 1024.0), target.rss_gib, "GiB");
  std::printf("  simulated ops/s (whole pipeline) %.0f; ops/s (timing stage only) %.0f\n", ops / best_s,
              ops / time_s);
  return 0;
}

int bench_sweep(int argc, char** argv, const std::string& path, unsigned threads, const Targets& target) {
  const std::vector<std::string> grid = values_of(argc, argv, "--grid");
  std::vector<GridAxis> axes;
  for (const auto& g : grid) axes.push_back(parse_grid_axis(g));
  const std::size_t points = grid_size(axes);
  // The real `zsim sweep` command, run in process (same parser, evaluator, thread pool, summary).
  std::vector<std::string> args = {"zsim", "sweep", path, "--threads", std::to_string(threads), "--top", "3"};
  for (const auto& g : grid) {
    args.push_back("--grid");
    args.push_back(g);
  }
  std::vector<const char*> cargv;
  for (const auto& a : args) cargv.push_back(a.c_str());
  std::ostringstream out, err;
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  const int rc = run_cli(static_cast<int>(cargv.size()), cargv.data(), out, err);
  const double wall_s = seconds_since(t0);
  const double cpu_s = cpu_seconds() - cpu0;
  const double rss = peak_rss_bytes();
  std::printf("zsim_bench sweep: %s, %zu points, %u thread(s), exit %d\n", path.c_str(), points, threads, rc);
  std::printf("%s", out.str().c_str());
  if (rc != 0) std::printf("%s", err.str().c_str());
  print_ratio("wall time", wall_s, target.wall_s, "s");
  std::printf("  points/s %.1f; CPU %.1f s (user + sys, all threads) = %.1f ms per point; peak RSS %.3f GiB\n",
              static_cast<double>(points) / wall_s, cpu_s, 1e3 * cpu_s / static_cast<double>(points),
              rss / (1024.0 * 1024.0 * 1024.0));
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  tune_allocator_for_batch_work();  // as zsim itself does
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: zsim_bench pipeline SCENARIO [--steps N] [--repeat R] [--target-s S] [--target-gib G] [--unrolled 1]\n"
                 "       zsim_bench sweep SCENARIO --grid KEY=V1,V2,... [--grid ...] [--threads T] [--target-s S]\n");
    return 2;
  }
  const std::string mode = argv[1], path = argv[2];
  try {
    if (mode == "pipeline")
      return bench_pipeline(path, int_option(argc, argv, "--steps", 1), int_option(argc, argv, "--repeat", 3),
                            {double_option(argc, argv, "--target-s", 1.0), double_option(argc, argv, "--target-gib", 1.0)},
                            int_option(argc, argv, "--unrolled", 0) != 0);
    if (mode == "sweep")
      return bench_sweep(argc, argv, path, static_cast<unsigned>(int_option(argc, argv, "--threads", 2)),
                         {double_option(argc, argv, "--target-s", 60.0), 0});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zsim_bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "zsim_bench: unknown mode '%s'\n", mode.c_str());
  return 2;
}
